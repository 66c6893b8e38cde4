#include "services/gitworker/acceptance_gate.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace reverser::gitworker {
namespace {

std::string ObjectText(const DocumentKey& key) {
  return key.namespace_.empty() ? absl::StrCat(key.kind, " ", key.name)
                                : absl::StrCat(key.kind, " ", key.namespace_, "/", key.name);
}

// A document of a file: the file alone when it holds one, else with its 1-based number.
std::string Where(const std::string& file, size_t document, size_t documents) {
  if (documents <= 1) return file;
  return absl::StrCat(file, " (document ", document + 1, ")");
}

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

bool Under(absl::string_view path, const std::string& root) {
  return root.empty() ||
         (absl::StartsWith(path, root) && path.size() > root.size() && path[root.size()] == '/');
}

absl::string_view Relative(absl::string_view path, const std::string& root) {
  return root.empty() ? path : path.substr(root.size() + 1);
}

}  // namespace

absl::string_view IssueKindName(IssueKind kind) {
  switch (kind) {
    case IssueKind::kDuplicate:
      return "duplicate";
    case IssueKind::kNonKrm:
      return "non-krm";
    case IssueKind::kInvalidYaml:
      return "invalid-yaml";
    case IssueKind::kForeignSymlink:
      return "foreign-symlink";
    case IssueKind::kForeignSubmodule:
      return "foreign-submodule";
    case IssueKind::kIgnoreShadowsManaged:
      return "ignore-shadows-managed";
    case IssueKind::kInvalidIgnore:
      return "invalid-ignore";
    case IssueKind::kWriteEscapesScope:
      return "write-escapes-scope";
    case IssueKind::kWriteFanIn:
      return "write-fan-in";
  }
  return "unknown";
}

bool ExemptFromKrm(absl::string_view path) {
  const absl::string_view name = BaseName(path);
  return name == ".sops.yaml" || name == "kustomization.yaml" || name == "kustomization.yml" ||
         name == "Kustomization";
}

std::vector<GateIssue> CheckPath(const GateInput& input) {
  std::vector<GateIssue> issues;
  auto add = [&](IssueKind kind, const std::string& text) {
    issues.push_back({kind, absl::StrCat(IssueKindName(kind), ": ", text)});
  };
  const IdentityIndex& index = *input.index;
  const std::string& root = index.path();
  const std::string ignore_file = root.empty() ? ".gittargetignore" : root + "/.gittargetignore";

  if (!input.ignore.error.empty()) {
    // The parser names the line as ".gittargetignore line N: ..."; say which file that is.
    absl::string_view error = input.ignore.error;
    add(IssueKind::kInvalidIgnore, absl::ConsumePrefix(&error, ".gittargetignore ")
                                       ? absl::StrCat(ignore_file, " ", error)
                                       : absl::StrCat(ignore_file, ": ", error));
  }
  // Content, file by file (paths sorted): the first document of an identity is its home, every
  // further one a duplicate.
  std::map<DocumentKey, std::string> first;
  for (const auto& [path, file] : index.files()) {
    if (!file.readable) {
      add(IssueKind::kInvalidYaml, absl::StrCat(path, " does not parse as YAML"));
      continue;
    }
    const size_t count = file.documents.size();
    for (size_t i = 0; i < count; ++i) {
      const DocumentKey* key = file.documents[i];
      if (key == nullptr) continue;
      auto [seen, inserted] = first.try_emplace(*key, Where(path, i, count));
      if (!inserted) {
        add(IssueKind::kDuplicate,
            absl::StrCat(ObjectText(*key), " in ", seen->second, " and ", Where(path, i, count)));
      }
    }
    if (ExemptFromKrm(path)) continue;
    for (size_t i : file.non_krm) {
      add(IssueKind::kNonKrm,
          absl::StrCat(Where(path, i, count), " has no apiVersion, kind or metadata.name"));
    }
  }
  for (const auto& [path, kind] : index.foreign_entries()) {
    if (kind == git::FileEntry::Kind::kSymlink) {
      add(IssueKind::kForeignSymlink, absl::StrCat(path, " is a symlink"));
    } else {
      add(IssueKind::kForeignSubmodule, absl::StrCat(path, " is a submodule"));
    }
  }
  // What .gittargetignore hides that reverser manages: documents an earlier read saw there.
  for (const auto& [path, ignored] : index.ignored()) {
    for (const DocumentKey& key : ignored.known) {
      if (input.followed != nullptr && !input.followed->count({key.group, key.kind})) continue;
      add(IssueKind::kIgnoreShadowsManaged,
          absl::StrCat(ignore_file, " hides ", path, ", which holds ", ObjectText(key)));
      break;
    }
  }

  // The plan: every file it changes stays under the path and out of what is ignored.
  for (const std::string& path : input.changed_files) {
    if (!Under(path, root)) {
      add(IssueKind::kWriteEscapesScope,
          absl::StrCat(path, " is outside ", root.empty() ? "/" : root));
      continue;
    }
    if (input.ignore.rules != nullptr && input.ignore.rules->Ignored(Relative(path, root))) {
      add(IssueKind::kIgnoreShadowsManaged,
          absl::StrCat(ignore_file, " hides ", path, ", which reverser writes"));
    }
  }
  // New objects sharing a placement file are appended as a bundle, except into a file that
  // holds one document only (an encrypted one).
  std::map<std::string, std::vector<const GateWrite*>> placed;
  for (const GateWrite& write : input.writes) {
    if (write.deleted || index.Find(write.key).has_value()) continue;
    auto& at = placed[write.path];
    bool again = false;
    for (const GateWrite* other : at) again = again || other->key == write.key;
    if (!again) at.push_back(&write);
  }
  for (const auto& [path, writes] : placed) {
    if (writes.size() < 2) continue;
    bool single = false;
    for (const GateWrite* write : writes) single = single || write->sensitive;
    if (!single) continue;
    std::string more;
    if (writes.size() > 2) more = absl::StrCat(" (and ", writes.size() - 2, " more)");
    add(IssueKind::kWriteFanIn,
        absl::StrCat(ObjectText(writes[0]->key), " and ", ObjectText(writes[1]->key), more,
                     " are both placed at ", path, ", a file of one document"));
  }
  return issues;
}

std::string GitPathReason(const std::vector<GateIssue>& issues) {
  bool all_ignore = !issues.empty(), all_boundary = !issues.empty();
  for (const GateIssue& issue : issues) {
    all_ignore = all_ignore && issue.kind == IssueKind::kIgnoreShadowsManaged;
    all_boundary = all_boundary && (issue.kind == IssueKind::kWriteEscapesScope ||
                                    issue.kind == IssueKind::kWriteFanIn);
  }
  if (all_ignore) return "IgnoreShadowsManagedPath";
  if (all_boundary) return "WriteBoundaryRefused";
  return "UnsupportedContent";
}

std::string GitPathMessage(const std::string& path, const std::vector<GateIssue>& issues) {
  std::string message = absl::StrCat("Git path refused at ", path.empty() ? "/" : path);
  if (issues.empty()) return message;
  absl::StrAppend(&message, ": ", issues.front().text);
  if (issues.size() > 1) absl::StrAppend(&message, " (and ", issues.size() - 1, " more issue(s))");
  return message;
}

}  // namespace reverser::gitworker
