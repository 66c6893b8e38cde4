#include "services/gitworker/identity_index.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/core/types.h"
#include "libs/manifest/yaml_reader.h"

namespace reverser::gitworker {
namespace {

bool IsYamlFile(absl::string_view path) {
  return absl::EndsWith(path, ".yaml") || absl::EndsWith(path, ".yml");
}

}  // namespace

std::optional<DocumentKey> IdentityIndex::KeyOfFile(const std::string& text) {
  auto key = ReadKeyOfFile(text);
  return key.ok() ? *key : std::nullopt;
}

absl::StatusOr<std::optional<DocumentKey>> IdentityIndex::ReadKeyOfFile(
    const std::string& text, const manifest::YamlReadLimits& limits) {
  auto docs = manifest::ParseYamlDocuments(text, limits);
  if (!docs.ok()) {
    // A limit is a refusal; a syntax error just means this is no document of ours.
    if (absl::IsResourceExhausted(docs.status())) return docs.status();
    return std::nullopt;
  }
  // Trailing empty documents ("---" at the end) do not count.
  std::vector<const nlohmann::json*> objects;
  for (const auto& doc : *docs) {
    if (!doc.is_null()) objects.push_back(&doc);
  }
  if (objects.size() != 1 || !objects[0]->is_object()) return std::nullopt;
  const nlohmann::json& doc = *objects[0];
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

absl::StatusOr<IdentityIndex> IdentityIndex::Build(
    git::Repository& repo, const std::optional<std::string>& base, const std::string& path,
    const IndexLimits& limits, const std::map<std::string, RefusedFile>* known_refused) {
  IdentityIndex index;
  index.path_ = path;
  index.yaml_limits_ = limits.yaml;
  if (!base.has_value()) return index;
  ASSIGN_OR_RETURN(std::vector<git::FileEntry> files, repo.ListFileEntries(*base, path));
  for (const git::FileEntry& file : files) {
    if (!IsYamlFile(file.path)) continue;
    if (known_refused != nullptr) {
      if (auto known = known_refused->find(file.blob_id); known != known_refused->end()) {
        index.RefuseFile(file.path, known->second);
        continue;
      }
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
    auto key = ReadKeyOfFile(text, limits.yaml);
    if (!key.ok()) {
      index.RefuseFile(file.path, {reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT,
                                   absl::StrCat("blob ", file.blob_id, ": ", key.status().message(),
                                                "; not read, left alone"),
                                   file.blob_id});
      continue;
    }
    if (key->has_value()) index.Record(file.path, **key);
  }
  return index;
}

void IdentityIndex::Add(const std::string& path, const std::string& text) {
  auto key = ReadKeyOfFile(text, yaml_limits_);
  if (!key.ok()) {
    RefuseFile(path, {reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT,
                      std::string(key.status().message())});
    return;
  }
  if (key->has_value()) Record(path, **key);
}

void IdentityIndex::RefuseFile(const std::string& path, RefusedFile refused) {
  Remove(path);
  refused_[path] = std::move(refused);
}

void IdentityIndex::Record(const std::string& path, const DocumentKey& key) {
  PathMap entries;
  entries.emplace(path, key);
  Record(entries.extract(entries.begin()));
}

void IdentityIndex::Record(std::map<std::string, DocumentKey>::node_type entry) {
  // Two files claiming one identity: keep the first (sorted) so the choice is stable.
  if (by_key_.count(&entry.mapped())) return;
  auto result = by_path_.insert(std::move(entry));
  if (!result.inserted) return;
  by_key_.emplace(&result.position->second, &result.position->first);
}

void IdentityIndex::Remove(const std::string& path) {
  refused_.erase(path);
  auto it = by_path_.find(path);
  if (it == by_path_.end()) return;
  by_key_.erase(&it->second);
  by_path_.erase(it);
}

void IdentityIndex::Apply(const git::ChangeSet& changes, std::map<std::string, DocumentKey>* keys) {
  const std::string prefix = path_.empty() ? "" : path_ + "/";
  for (const auto& [path, content] : changes) {
    if (!absl::StartsWith(path, prefix) || !IsYamlFile(path)) continue;
    Remove(path);
    if (!content.has_value()) continue;
    if (auto key = keys->find(path); key != keys->end()) {
      Record(keys->extract(key));
    } else {
      Add(path, *content);
    }
  }
}

std::optional<std::string> IdentityIndex::Find(const DocumentKey& key) const {
  auto it = by_key_.find(&key);
  if (it == by_key_.end()) return std::nullopt;
  return *it->second;
}

std::vector<std::pair<DocumentKey, std::string>> IdentityIndex::OfType(
    const std::string& group, const std::string& kind,
    const std::optional<std::string>& namespace_) const {
  std::vector<std::pair<DocumentKey, std::string>> out;
  for (const auto& [key, path] : by_key_) {
    if (key->group != group || key->kind != kind) continue;
    if (namespace_.has_value() && key->namespace_ != *namespace_) continue;
    out.emplace_back(*key, *path);
  }
  return out;
}

}  // namespace reverser::gitworker
