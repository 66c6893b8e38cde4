#pragma once

// A YAML stream cut into its documents by bytes, so one document can be replaced, removed or
// appended while every other byte of the file stays as it was: sibling documents, `---` lines
// (with their trailing comments), `...` end markers, comments between documents, a leading
// comment block, the file's line endings and a UTF-8 byte-order mark.
//
// The cut is made on lines, as the YAML spec allows: a line starting with `---` or `...`
// followed by a blank or the line end is always a document marker (it may appear in no scalar).
// No YAML is parsed here; callers check the document count against a parser's (yaml_reader.h)
// before trusting the cut. It is exact for documents that are collections (every Kubernetes
// object); a top-level plain scalar may run on at column 0 where no line-based cut can tell.
//
// What each document owns (its "segment"): from its `---` line to the next document's `---`
// line. The first document without `---` starts at its first content line; the comment and
// blank lines before it, like those before a first `---`, are the stream's preamble, which no
// edit touches. Within a segment:
//   head     the `---` line and the comment/blank lines after it (kept by Replace);
//   content  from the first content line up to the tail (what Replace rewrites);
//   tail     from a `...` line (or a `%` directive, which ends a document too) to the
//            segment's end, else the trailing lines that are all
//            column-0 comments or blank, starting at a column-0 comment (kept by Replace).
// Column 0 because only there is a `#` certainly a comment: an indented one may be a line of a
// block scalar, and text this writer renders has no line starting with `#`, so a replaced
// document reads back as exactly the content written. (The one line misread this way: a quoted
// scalar's continuation line starting with `#` at column 0, ending a document. Replace then
// leaves it behind as a comment; nothing else changes.)

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace reverser::manifest {

class YamlDocuments {
 public:
  // Cuts `text`. Never fails: text without documents (empty, only comments) has none.
  static YamlDocuments Split(absl::string_view text);

  // Documents, including removed ones (indices never shift; see Remove).
  size_t size() const { return documents_.size(); }
  bool removed(size_t i) const { return documents_[i].removed; }
  // No content lines: a null document (`---` alone, or only comments after it).
  bool empty(size_t i) const { return documents_[i].content.empty(); }
  // The bytes a parser reads as document i (without its head and tail), line endings as in
  // the file.
  absl::string_view content(size_t i) const { return documents_[i].content; }
  absl::string_view tail(size_t i) const { return documents_[i].tail; }
  // Documents neither removed nor empty.
  size_t CountNonEmpty() const;

  // The file's line ending ("\n", "\r\n" or "\r": its first line break; "\n" without one) and
  // whether it starts with a UTF-8 byte-order mark.
  const std::string& newline() const { return newline_; }
  bool has_bom() const { return bom_; }

  // `yaml` ("\n" line endings, ending in one) in the file's line endings.
  std::string ToFileNewlines(absl::string_view yaml) const;

  // Replaces document i's content with `yaml` ("\n" line endings); head and tail stay. A
  // document whose content starts on its `---` line (`--- {a: 1}`) gets a `---` line of its
  // own. Returns false (and changes nothing) when the content is already those bytes.
  bool Replace(size_t i, absl::string_view yaml);
  // Removes document i with its segment (its `---` line, comments, `...`). Indices of the
  // other documents stay valid.
  void Remove(size_t i);
  // Appends `yaml` ("\n" line endings) as a new last document: after a `---` line, unless the
  // stream holds nothing but a byte-order mark. Returns its index.
  size_t Append(absl::string_view yaml);

  // The stream as bytes.
  std::string Text() const;

 private:
  struct Document {
    std::string head;
    std::string content;
    std::string tail;
    bool removed = false;
  };
  bool bom_ = false;
  std::string newline_ = "\n";
  std::string preamble_;  // after the byte-order mark
  std::vector<Document> documents_;
};

}  // namespace reverser::manifest
