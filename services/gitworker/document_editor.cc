#include "services/gitworker/document_editor.h"

#include "absl/strings/str_cat.h"

namespace reverser::gitworker {
namespace {

absl::Status Refused(absl::string_view message) {
  return WithRefusalReason(absl::FailedPreconditionError(message),
                           reverser::v1::REFUSAL_REASON_COMMIT_REFUSED);
}

}  // namespace

DocumentEditor::DocumentEditor(const IdentityIndex& index, BlobReader read, IndexLimits limits)
    : index_(index), read_(std::move(read)), limits_(limits) {}

std::optional<std::string> DocumentEditor::Locate(const DocumentKey& key) const {
  if (auto moved = moved_.find(key); moved != moved_.end()) return moved->second;
  return index_.Find(key);
}

std::optional<size_t> DocumentEditor::DocumentOf(const Working& file, const DocumentKey& key) {
  for (size_t i = 0; i < file.keys.size(); ++i) {
    if (!file.documents.removed(i) && file.keys[i] == key) return i;
  }
  return std::nullopt;
}

absl::StatusOr<DocumentEditor::Working*> DocumentEditor::Load(const std::string& path) {
  if (auto it = files_.find(path); it != files_.end()) return &it->second;
  if (index_.IsRefused(path)) {
    return Refused(absl::StrCat("its file ", path, " is refused (",
                                index_.refused_files().at(path).message, ") and left alone"));
  }
  Working working;
  if (const IdentityIndex::File* file = index_.FileAt(path); file != nullptr) {
    // Writing into YAML that does not parse would only hide the object from the next read.
    if (!file->readable) {
      return Refused(absl::StrCat("its file ", path,
                                  " holds YAML that cannot be read document by document; left "
                                  "alone"));
    }
    if (!read_) return absl::InternalError(absl::StrCat("no blob reader for ", path));
    absl::StatusOr<std::string> text = read_(file->blob_id);
    if (!text.ok()) return text.status();
    working.documents = manifest::YamlDocuments::Split(*text);
    if (working.documents.size() != file->documents.size()) {
      return Refused(absl::StrCat("its file ", path, " no longer matches its index"));
    }
    for (const DocumentKey* key : file->documents) {
      working.keys.push_back(key ? std::optional<DocumentKey>(*key) : std::nullopt);
    }
    working.existed = true;
    working.had_objects = working.documents.CountNonEmpty() > 0;
  }
  return &files_.emplace(path, std::move(working)).first->second;
}

absl::StatusOr<std::string> DocumentEditor::Upsert(const DocumentKey& key,
                                                   const std::string& new_path,
                                                   absl::string_view yaml, bool sensitive) {
  if (std::optional<std::string> path = Locate(key); path.has_value()) {
    absl::StatusOr<Working*> file = Load(*path);
    if (!file.ok()) return file.status();
    Working& working = **file;
    if (std::optional<size_t> at = DocumentOf(working, key); at.has_value()) {
      if (sensitive && working.documents.CountNonEmpty() > 1) {
        return Refused(absl::StrCat("its file ", *path,
                                    " holds other documents: an encrypted file is never bundled"));
      }
      if (working.documents.Replace(*at, yaml)) {
        ++working.changed;
        working.edited.push_back(key);
      }
      return *path;
    }
    // Not where the index said (a duplicate another edit removed): written as new.
  }
  absl::StatusOr<Working*> file = Load(new_path);
  if (!file.ok()) return file.status();
  Working& working = **file;
  if (sensitive && working.documents.CountNonEmpty() > 0) {
    return Refused(absl::StrCat("its file ", new_path,
                                " holds other documents: an encrypted file is never bundled"));
  }
  working.documents.Append(yaml);
  working.keys.push_back(key);
  ++working.changed;
  working.edited.push_back(key);
  moved_[key] = new_path;
  return new_path;
}

absl::StatusOr<std::optional<std::string>> DocumentEditor::Delete(
    const DocumentKey& key, const std::optional<std::string>& path) {
  const std::optional<std::string> located = Locate(key);
  const std::optional<std::string> where = path.has_value() ? path : located;
  if (!where.has_value()) return std::optional<std::string>();
  absl::StatusOr<Working*> file = Load(*where);
  if (!file.ok()) return file.status();
  Working& working = **file;
  std::optional<size_t> at = DocumentOf(working, key);
  if (!at.has_value()) return std::optional<std::string>();
  working.documents.Remove(*at);
  ++working.changed;
  working.edited.push_back(key);
  if (where == located) moved_[key] = std::nullopt;
  return where;
}

DocumentEditor::Result DocumentEditor::Finish() && {
  Result result;
  for (auto& [path, working] : files_) {
    if (working.changed == 0) continue;
    auto refuse = [&, &path = path, &working = working](absl::Status status) {
      result.refused.push_back({path, std::move(status), std::move(working.edited)});
    };
    if (working.documents.CountNonEmpty() == 0 && (working.had_objects || !working.existed)) {
      // The last document went: so does the file (one created and emptied again never was).
      if (working.existed) result.changes[path] = std::nullopt;
      result.changed_documents += working.changed;
      continue;
    }
    FileDocuments expected;
    for (size_t i = 0; i < working.keys.size(); ++i) {
      if (!working.documents.removed(i)) expected.push_back(working.keys[i]);
    }
    std::string text = working.documents.Text();
    // Never write what the index would refuse, or read otherwise, the next time.
    if (text.size() > limits_.max_file_bytes) {
      refuse(WithRefusalReason(
          absl::ResourceExhaustedError(absl::StrCat(
              "its file ", path, " would be ", text.size(), " bytes, more than the file limit of ",
              limits_.max_file_bytes, "; the file is left as it was")),
          reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED));
      continue;
    }
    // A file that is exactly one rendered document needs no reading back: the renderer
    // checked it.
    const bool only_rendered = expected.size() == 1 && working.documents.size() == 1 &&
                               text == working.documents.content(0) && !working.existed;
    if (!only_rendered) {
      absl::StatusOr<std::optional<FileDocuments>> read =
          IdentityIndex::ReadDocuments(text, limits_.yaml);
      if (!read.ok()) {
        refuse(WithRefusalReason(absl::ResourceExhaustedError(absl::StrCat(
                                     "its file ", path,
                                     " would exceed the read "
                                     "limits (",
                                     read.status().message(), "); the file is left as it was")),
                                 reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED));
        continue;
      }
      if (!read->has_value() || **read != expected) {
        refuse(Refused(absl::StrCat(
            "its file ", path, " would not read back as written; the file is left as it was")));
        continue;
      }
    }
    result.changes[path] = std::move(text);
    result.documents[path] = std::move(expected);
    result.changed_documents += working.changed;
  }
  return result;
}

}  // namespace reverser::gitworker
