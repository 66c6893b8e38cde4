#include "services/gitworker/acceptance_gate.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

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

// A name or entry from the repository in a one-line message: as it is when it is a plain word,
// else quoted and escaped; at most 100 bytes of it.
std::string Shown(absl::string_view text) {
  constexpr size_t kMax = 100;
  const bool plain =
      !text.empty() && text.size() <= kMax && std::all_of(text.begin(), text.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
      });
  if (plain) return std::string(text);
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMax)), text.size() > kMax ? "..." : "",
                      "\"");
}

absl::string_view Dir(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? absl::string_view() : path.substr(0, slash);
}

// `entry` taken from `dir`, as a path from the repository root; nullopt when it leaves the
// repository or is absolute.
std::optional<std::string> JoinLocal(absl::string_view dir, absl::string_view entry) {
  if (absl::StartsWith(entry, "/")) return std::nullopt;
  std::vector<absl::string_view> parts = absl::StrSplit(dir, '/', absl::SkipEmpty());
  for (absl::string_view part : absl::StrSplit(entry, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (parts.empty()) return std::nullopt;
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  return absl::StrJoin(parts, "/");
}

// Whether `entries` (keyed by path) hold `path` or anything under it.
template <typename Map>
bool HoldsPathOrUnder(const Map& entries, const std::string& path) {
  if (path.empty()) return !entries.empty();
  if (entries.count(path)) return true;
  const std::string dir = path + "/";
  auto it = entries.lower_bound(dir);
  return it != entries.end() && absl::StartsWith(it->first, dir);
}

bool InTree(const IdentityIndex& index, const std::string& path) {
  return HoldsPathOrUnder(index.files(), path) || HoldsPathOrUnder(index.other_files(), path) ||
         HoldsPathOrUnder(index.refused_files(), path) || HoldsPathOrUnder(index.ignored(), path) ||
         HoldsPathOrUnder(index.foreign_entries(), path);
}

// Whether a `resources:` entry names something kustomize fetches (a URL, a git reference)
// rather than a file or folder of the tree. A host-like first segment ("github.com/org/repo")
// is taken for a repository unless the tree holds that path.
bool RemoteResource(absl::string_view entry, absl::string_view dir, const IdentityIndex& index) {
  if (absl::StrContains(entry, "://") || absl::StartsWith(entry, "git@") ||
      absl::StartsWith(entry, "git::") || absl::StrContains(entry, '?')) {
    return true;
  }
  const size_t slash = entry.find('/');
  const absl::string_view first = entry.substr(0, slash);
  if (absl::StrContains(first, ':')) return true;  // host:path, user@host:repo
  if (slash == absl::string_view::npos || !absl::StrContains(first, '.') ||
      absl::StartsWith(first, ".")) {
    return false;
  }
  const std::optional<std::string> local = JoinLocal(dir, entry);
  return !local.has_value() || !InTree(index, *local);
}

bool StringValued(const nlohmann::json& entry, absl::string_view key) {
  auto it = entry.find(key);
  return it != entry.end() && it->is_string() && !it->get<std::string>().empty();
}

// `images:` as reverser reads it: entries naming an image, with only kustomize's string fields.
bool WellFormedImages(const nlohmann::json& images) {
  if (!images.is_array()) return false;
  for (const nlohmann::json& image : images) {
    if (!image.is_object() || !StringValued(image, "name")) return false;
    for (const auto& [key, value] : image.items()) {
      if (key != "name" && key != "newName" && key != "newTag" && key != "digest") return false;
      if (!value.is_string()) return false;
    }
  }
  return true;
}

// `replicas:` as reverser reads it: entries of a name and a count, nothing else.
bool WellFormedReplicas(const nlohmann::json& replicas) {
  if (!replicas.is_array()) return false;
  for (const nlohmann::json& replica : replicas) {
    if (!replica.is_object() || replica.size() != 2 || !StringValued(replica, "name")) {
      return false;
    }
    auto count = replica.find("count");
    if (count == replica.end() || !count->is_number_integer() ||
        (!count->is_number_unsigned() && count->get<int64_t>() < 0)) {
      return false;
    }
  }
  return true;
}

// What a kustomization uses that reverser does not model, each named as the file writes it
// (empty: nothing). Modelled: apiVersion, kind Kustomization, metadata, namespace, resources of
// the tree, well-formed images and replicas; a key set to null counts as absent.
std::vector<std::string> UnmodelledFeatures(const nlohmann::json& doc, absl::string_view path,
                                            const IdentityIndex& index) {
  std::vector<std::string> out;
  const absl::string_view dir = Dir(path);
  for (const auto& [key, value] : doc.items()) {
    if (value.is_null()) continue;
    if (key == "apiVersion") {
      if (!value.is_string()) out.push_back("malformed apiVersion");
    } else if (key == "kind") {
      if (!value.is_string()) {
        out.push_back("malformed kind");
      } else if (value.get<std::string>() != "Kustomization") {
        out.push_back(absl::StrCat("kind ", Shown(value.get<std::string>())));
      }
    } else if (key == "metadata") {
      if (!value.is_object()) out.push_back("malformed metadata");
    } else if (key == "namespace") {
      if (!value.is_string()) out.push_back("malformed namespace");
    } else if (key == "resources") {
      if (!value.is_array()) {
        out.push_back("malformed resources");
        continue;
      }
      for (const nlohmann::json& entry : value) {
        if (!entry.is_string() || entry.get<std::string>().empty()) {
          out.push_back("malformed resources");
          break;
        }
        const std::string& resource = entry.get_ref<const std::string&>();
        if (RemoteResource(resource, dir, index)) {
          out.push_back(absl::StrCat("remote resource ", Shown(resource)));
        }
      }
    } else if (key == "images") {
      if (!WellFormedImages(value)) out.push_back("malformed images");
    } else if (key == "replicas") {
      if (!WellFormedReplicas(value)) out.push_back("malformed replicas");
    } else {
      out.push_back(Shown(key));  // generators, patches, components, helm, prefixes, ...
    }
  }
  return out;
}

// The group of kustomize's own kinds (Kustomization, Component): a kustomization stating one
// with metadata.name states no object of the cluster.
constexpr absl::string_view kKustomizeGroup = "kustomize.config.k8s.io";

}  // namespace

absl::string_view IssueKindName(IssueKind kind) {
  switch (kind) {
    case IssueKind::kDuplicate:
      return "duplicate";
    case IssueKind::kNonKrm:
      return "non-krm";
    case IssueKind::kInvalidYaml:
      return "invalid-yaml";
    case IssueKind::kImpureManagedFile:
      return "impure-managed-file";
    case IssueKind::kMixedManagedAllowlisted:
      return "mixed-managed-allowlisted";
    case IssueKind::kUnsupportedKustomize:
      return "unsupported-kustomize";
    case IssueKind::kForeignFile:
      return "foreign-file";
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

bool IsKustomization(absl::string_view path) {
  const absl::string_view name = BaseName(path);
  return name == "kustomization.yaml" || name == "kustomization.yml" || name == "Kustomization";
}

bool ExemptFromKrm(absl::string_view path) {
  return BaseName(path) == ".sops.yaml" || IsKustomization(path);
}

std::vector<GateIssue> CheckPath(const GateInput& input) {
  std::vector<GateIssue> issues;
  auto add = [&](IssueKind kind, const std::string& text) {
    issues.push_back({kind, absl::StrCat(IssueKindName(kind), ": ", text)});
  };
  const IdentityIndex& index = *input.index;
  const std::string& root = index.path();
  const std::string ignore_file = root.empty() ? ".gittargetignore" : root + "/.gittargetignore";
  auto managed = [&](const DocumentKey& key) {
    return input.followed == nullptr || input.followed->count({key.group, key.kind}) > 0;
  };
  // A kustomization reverser would write beside: one document of what it models, or nothing.
  auto check_kustomization = [&](const std::string& path, const std::string& blob_id) {
    absl::StatusOr<std::string> text = input.read_blob
                                           ? input.read_blob(blob_id)
                                           : absl::FailedPreconditionError("no reader for blobs");
    if (!text.ok()) {
      add(IssueKind::kUnsupportedKustomize,
          absl::StrCat(path, " could not be read: ", text.status().message()));
      return;
    }
    auto docs = manifest::ParseYamlDocuments(*text, input.yaml_limits);
    if (!docs.ok()) {
      if (absl::IsResourceExhausted(docs.status())) {
        add(IssueKind::kUnsupportedKustomize,
            absl::StrCat(path, " could not be read: ", docs.status().message()));
      } else {
        add(IssueKind::kInvalidYaml, absl::StrCat(path, " does not parse as YAML"));
      }
      return;
    }
    const nlohmann::json* kustomization = nullptr;
    size_t stated = 0;
    for (const nlohmann::json& doc : *docs) {
      if (doc.is_null()) continue;
      ++stated;
      kustomization = &doc;
    }
    if (stated > 1) {
      add(IssueKind::kUnsupportedKustomize,
          absl::StrCat(path, " holds ", stated, " documents, not one kustomization"));
      return;
    }
    if (kustomization == nullptr) return;  // empty: renders nothing
    if (!kustomization->is_object()) {
      add(IssueKind::kUnsupportedKustomize, absl::StrCat(path, " is not a YAML mapping"));
      return;
    }
    std::vector<std::string> features = UnmodelledFeatures(*kustomization, path, index);
    if (features.empty()) return;
    constexpr size_t kNamed = 5;  // a hostile file may list thousands
    std::string named =
        absl::StrJoin(features.begin(), features.begin() + std::min(features.size(), kNamed), ", ");
    if (features.size() > kNamed) {
      absl::StrAppend(&named, " (and ", features.size() - kNamed, " more)");
    }
    add(IssueKind::kUnsupportedKustomize,
        absl::StrCat(path, " uses ", named, ", which reverser does not model"));
  };

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
    if (ExemptFromKrm(path)) {
      // Kept as they are, never edited: an object in one would be edited in a file reverser
      // does not own, or missed.
      for (size_t i = 0; i < count; ++i) {
        const DocumentKey* key = file.documents[i];
        if (key == nullptr || key->group == kKustomizeGroup) continue;
        add(IssueKind::kMixedManagedAllowlisted,
            absl::StrCat(ObjectText(*key), " in ", Where(path, i, count),
                         ", a file reverser keeps as it is"));
      }
      if (IsKustomization(path)) check_kustomization(path, file.blob_id);
      continue;
    }
    bool holds_managed = false;
    for (size_t i = 0; i < count; ++i) {
      const DocumentKey* key = file.documents[i];
      if (key == nullptr) continue;
      holds_managed = holds_managed || managed(*key);
      auto [seen, inserted] = first.try_emplace(*key, Where(path, i, count));
      if (!inserted) {
        add(IssueKind::kDuplicate,
            absl::StrCat(ObjectText(*key), " in ", seen->second, " and ", Where(path, i, count)));
      }
    }
    // A file of managed objects holds objects only: reverser edits it document by document,
    // and a passenger beside them is content it cannot vouch for.
    for (size_t i = 0; i < count; ++i) {
      if (file.documents[i] != nullptr) continue;
      const bool non_krm =
          std::find(file.non_krm.begin(), file.non_krm.end(), i) != file.non_krm.end();
      if (holds_managed) {
        add(IssueKind::kImpureManagedFile,
            absl::StrCat(Where(path, i, count),
                         non_krm ? " has no apiVersion, kind or metadata.name" : " is empty",
                         " in a file of managed objects"));
      } else if (non_krm) {
        add(IssueKind::kNonKrm,
            absl::StrCat(Where(path, i, count), " has no apiVersion, kind or metadata.name"));
      }
    }
  }
  // A kustomization over a read limit renders what nobody checked.
  for (const auto& [path, refused] : index.refused_files()) {
    if (!IsKustomization(path)) continue;
    add(IssueKind::kUnsupportedKustomize, absl::StrCat(path, " is over a read limit, not read"));
  }
  // Files of no YAML role: README.md (the bootstrap one, and any person's) and the target's
  // own .gittargetignore belong; a Kustomization is checked as a kustomization; any other is
  // foreign, unless .gittargetignore names it (then it is not listed here at all).
  for (const auto& [path, blob_id] : index.other_files()) {
    if (path == ignore_file || BaseName(path) == "README.md") continue;
    if (IsKustomization(path)) {
      check_kustomization(path, blob_id);
      continue;
    }
    add(IssueKind::kForeignFile,
        absl::StrCat(path, " is no .yaml/.yml file (to keep it, name it in ", ignore_file, ")"));
  }
  for (const auto& [path, kind] : index.foreign_entries()) {
    if (kind == git::FileEntry::Kind::kSymlink) {
      add(IssueKind::kForeignSymlink, absl::StrCat(path, " is a symlink"));
    } else {
      add(IssueKind::kForeignSubmodule, absl::StrCat(path, " is a submodule"));
    }
  }
  for (const auto& [path, ignored] : index.ignored()) {
    // A pattern naming a kustomization cannot silence its check (as in the reference); one in
    // an ignored folder is out of the path, as that folder is.
    if (IsKustomization(path)) {
      const absl::string_view folder = Dir(Relative(path, root));
      const bool folder_ignored = input.ignore.rules != nullptr && !folder.empty() &&
                                  input.ignore.rules->Ignored(folder, /*is_dir=*/true);
      if (!folder_ignored) check_kustomization(path, ignored.blob_id);
    }
    // What .gittargetignore hides that reverser manages: documents an earlier read saw there.
    for (const DocumentKey& key : ignored.known) {
      if (!managed(key)) continue;
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
    all_ignore = all_ignore && (issue.kind == IssueKind::kIgnoreShadowsManaged ||
                                issue.kind == IssueKind::kInvalidIgnore);
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
