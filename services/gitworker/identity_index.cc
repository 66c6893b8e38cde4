#include "services/gitworker/identity_index.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/core/types.h"
#include "libs/manifest/yaml_documents.h"
#include "libs/manifest/yaml_reader.h"

namespace reverser::gitworker {
namespace {

bool IsYamlFile(absl::string_view path) {
  return absl::EndsWith(path, ".yaml") || absl::EndsWith(path, ".yml");
}

}  // namespace

std::optional<DocumentKey> IdentityIndex::KeyOfDocument(const nlohmann::json& doc) {
  if (!doc.is_object()) return std::nullopt;
  auto api_version = doc.find("apiVersion");
  auto kind = doc.find("kind");
  auto metadata = doc.find("metadata");
  if (api_version == doc.end() || !api_version->is_string() || kind == doc.end() ||
      !kind->is_string() || metadata == doc.end() || !metadata->is_object()) {
    return std::nullopt;
  }
  auto name = metadata->find("name");
  if (name == metadata->end() || !name->is_string()) return std::nullopt;
  auto group_version = core::ParseApiVersion(api_version->get<std::string>());
  if (!group_version.ok()) return std::nullopt;
  DocumentKey key;
  key.group = group_version->first;
  key.kind = kind->get<std::string>();
  key.name = name->get<std::string>();
  if (auto ns = metadata->find("namespace"); ns != metadata->end() && ns->is_string()) {
    key.namespace_ = ns->get<std::string>();
  }
  return key;
}

absl::StatusOr<std::optional<FileDocuments>> IdentityIndex::ReadDocuments(
    const std::string& text, const manifest::YamlReadLimits& limits, std::vector<size_t>* non_krm) {
  // Not a text file (or UTF-16, which the reader would decode but the cut cannot).
  if (text.find('\0') != std::string::npos) return std::nullopt;
  auto docs = manifest::ParseYamlDocuments(text, limits);
  if (!docs.ok()) {
    // A limit is a refusal; a syntax error just means this is no document of ours.
    if (absl::IsResourceExhausted(docs.status())) return docs.status();
    return std::nullopt;
  }
  // Edits go through the byte-level cut: it must see the documents the parser saw, else the
  // file is left alone rather than edited at the wrong bytes.
  const manifest::YamlDocuments cut = manifest::YamlDocuments::Split(text);
  if (cut.size() != docs->size()) return std::nullopt;
  FileDocuments out;
  out.reserve(docs->size());
  std::vector<size_t> foreign;
  for (size_t i = 0; i < docs->size(); ++i) {
    const nlohmann::json& doc = (*docs)[i];
    // A top-level scalar may run on at column 0 where the cut cannot follow it.
    if (cut.empty(i) != doc.is_null() || (doc.is_primitive() && !doc.is_null())) {
      return std::nullopt;
    }
    out.push_back(KeyOfDocument(doc));
    if (!out.back().has_value() && !doc.is_null()) foreign.push_back(i);
  }
  if (non_krm != nullptr) *non_krm = std::move(foreign);
  return out;
}

IdentityIndex IdentityIndex::Empty(const std::string& path, const IndexLimits& limits) {
  IdentityIndex index;
  index.path_ = path;
  index.limits_ = limits;
  return index;
}

absl::StatusOr<IdentityIndex> IdentityIndex::Build(
    git::Repository& repo, const std::optional<std::string>& base, const std::string& path,
    const IndexLimits& limits, const std::map<std::string, RefusedFile>* known_refused,
    const IdentityIndex* previous, const gitignore::IgnoreRules* ignore) {
  IdentityIndex index = Empty(path, limits);
  if (!base.has_value()) return index;
  ASSIGN_OR_RETURN(std::vector<git::FileEntry> files,
                   repo.ListFileEntries(*base, path, /*with_submodules=*/true));
  // What the previous index read, by blob: unchanged files are not read again.
  std::unordered_map<std::string, const File*> known;
  std::unordered_map<std::string, const IgnoredFile*> known_ignored;
  if (previous != nullptr) {
    for (const auto& [file_path, file] : previous->files_) known.emplace(file.blob_id, &file);
    for (const auto& [file_path, file] : previous->ignored_) {
      known_ignored.emplace(file.blob_id, &file);
    }
  }
  const size_t prefix = path.empty() ? 0 : path.size() + 1;
  for (const git::FileEntry& file : files) {
    if (ignore != nullptr && ignore->Ignored(absl::string_view(file.path).substr(prefix))) {
      // Never read; what an earlier index saw in this blob is kept, so a pattern that comes to
      // hide a managed document can be told (the acceptance gate's ignore-shadows-managed).
      IgnoredFile& ignored = index.ignored_[file.path];
      ignored.blob_id = file.blob_id;
      if (auto seen = known.find(file.blob_id); seen != known.end()) {
        for (const DocumentKey* key : seen->second->documents) {
          if (key != nullptr) ignored.known.push_back(*key);
        }
      } else if (auto was = known_ignored.find(file.blob_id); was != known_ignored.end()) {
        ignored.known = was->second->known;
      }
      continue;
    }
    if (file.kind != git::FileEntry::Kind::kFile) {
      index.foreign_[file.path] = file.kind;
      continue;
    }
    if (!IsYamlFile(file.path)) {
      index.other_[file.path] = file.blob_id;
      continue;
    }
    if (known_refused != nullptr) {
      if (auto refused = known_refused->find(file.blob_id); refused != known_refused->end()) {
        index.RefuseFile(file.path, refused->second);
        continue;
      }
    }
    if (auto seen = known.find(file.blob_id); seen != known.end()) {
      ++index.stats_.files_reused;
      if (!seen->second->readable) {
        index.RecordUnreadable(file.path, file.blob_id);
        continue;
      }
      FileDocuments documents;
      documents.reserve(seen->second->documents.size());
      for (const DocumentKey* key : seen->second->documents) {
        documents.push_back(key ? std::optional<DocumentKey>(*key) : std::nullopt);
      }
      index.Record(file.path, file.blob_id, std::move(documents), seen->second->non_krm);
      continue;
    }
    ASSIGN_OR_RETURN(uint64_t size, repo.BlobSize(file.blob_id));
    if (size > limits.max_file_bytes) {
      index.RefuseFile(file.path, {reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT,
                                   absl::StrCat("blob ", file.blob_id, ": ", size,
                                                " bytes, more than the limit of ",
                                                limits.max_file_bytes, "; not read, left alone"),
                                   file.blob_id});
      continue;
    }
    ASSIGN_OR_RETURN(std::string text, repo.ReadBlob(file.blob_id));
    ++index.stats_.files_read;
    index.Add(file.path, file.blob_id, text);
  }
  index.stats_.documents = index.by_key_.size();
  return index;
}

void IdentityIndex::Add(const std::string& path, std::string blob_id, const std::string& text) {
  std::vector<size_t> non_krm;
  auto documents =
      text.size() > limits_.max_file_bytes
          ? absl::StatusOr<std::optional<FileDocuments>>(absl::ResourceExhaustedError(absl::StrCat(
                text.size(), " bytes, more than the limit of ", limits_.max_file_bytes)))
          : ReadDocuments(text, limits_.yaml, &non_krm);
  if (!documents.ok()) {
    RefuseFile(path, {reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT,
                      absl::StrCat("blob ", blob_id, ": ", documents.status().message(),
                                   "; not read, left alone"),
                      blob_id});
    return;
  }
  if (!documents->has_value()) {
    RecordUnreadable(path, std::move(blob_id));
    return;
  }
  Record(path, std::move(blob_id), **std::move(documents), std::move(non_krm));
}

void IdentityIndex::RefuseFile(const std::string& path, RefusedFile refused) {
  Remove(path);
  ++stats_.refused;
  refused_[path] = std::move(refused);
}

void IdentityIndex::RecordUnreadable(const std::string& path, std::string blob_id) {
  Remove(path);
  ++stats_.unreadable;
  File& file = files_[path];
  file.blob_id = std::move(blob_id);
  file.readable = false;
}

void IdentityIndex::Record(const std::string& path, std::string blob_id, FileDocuments documents,
                           std::vector<size_t> non_krm) {
  Remove(path);
  auto [it, inserted] = files_.try_emplace(path);
  File& file = it->second;
  const std::string* stable_path = &it->first;
  file.blob_id = std::move(blob_id);
  file.non_krm = std::move(non_krm);
  file.documents.reserve(documents.size());
  for (std::optional<DocumentKey>& key : documents) {
    if (!key.has_value()) {
      file.documents.push_back(nullptr);
      continue;
    }
    auto entry = by_key_.try_emplace(std::move(*key)).first;
    Holders& holders = entry->second;
    // Sorted by path, each file once (a file may state one identity twice).
    auto at = std::lower_bound(holders.begin(), holders.end(), stable_path,
                               [](const std::string* a, const std::string* b) { return *a < *b; });
    if (at == holders.end() || *at != stable_path) holders.insert(at, stable_path);
    file.documents.push_back(&entry->first);
  }
}

void IdentityIndex::Remove(const std::string& path) {
  refused_.erase(path);
  ignored_.erase(path);
  auto it = files_.find(path);
  if (it == files_.end()) return;
  // Each identity once: erasing its entry invalidates every pointer to it.
  std::set<const DocumentKey*> keys(it->second.documents.begin(), it->second.documents.end());
  keys.erase(nullptr);
  for (const DocumentKey* key : keys) {
    auto entry = by_key_.find(*key);
    if (entry == by_key_.end()) continue;
    Holders& holders = entry->second;
    holders.erase(std::remove(holders.begin(), holders.end(), &it->first), holders.end());
    if (holders.empty()) by_key_.erase(entry);
  }
  files_.erase(it);
}

void IdentityIndex::Apply(const git::ChangeSet& changes,
                          std::map<std::string, FileDocuments>* known) {
  const std::string prefix = path_.empty() ? "" : path_ + "/";
  for (const auto& [path, content] : changes) {
    if (!absl::StartsWith(path, prefix)) continue;
    if (!IsYamlFile(path)) {
      if (content.has_value()) {
        other_[path] = git::BlobIdOf(*content);
      } else {
        other_.erase(path);
      }
      continue;
    }
    Remove(path);
    if (!content.has_value()) continue;
    std::string blob_id = git::BlobIdOf(*content);
    if (known != nullptr) {
      if (auto documents = known->find(path); documents != known->end()) {
        Record(path, std::move(blob_id), std::move(documents->second));
        known->erase(documents);
        continue;
      }
    }
    Add(path, std::move(blob_id), *content);
  }
}

const IdentityIndex::File* IdentityIndex::FileAt(const std::string& path) const {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : &it->second;
}

std::optional<std::string> IdentityIndex::Find(const DocumentKey& key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end() || it->second.empty()) return std::nullopt;
  return *it->second.front();
}

std::vector<std::pair<DocumentKey, std::string>> IdentityIndex::OfType(
    const std::string& group, const std::string& kind,
    const std::optional<std::string>& namespace_) const {
  std::vector<std::pair<DocumentKey, std::string>> out;
  // Keys sort by group, then kind: the type's documents are one run.
  for (auto it = by_key_.lower_bound(DocumentKey{group, kind, "", ""});
       it != by_key_.end() && it->first.group == group && it->first.kind == kind; ++it) {
    if (namespace_.has_value() && it->first.namespace_ != *namespace_) continue;
    for (const std::string* path : it->second) out.emplace_back(it->first, *path);
  }
  return out;
}

}  // namespace reverser::gitworker
