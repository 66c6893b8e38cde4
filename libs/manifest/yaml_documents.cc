#include "libs/manifest/yaml_documents.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace reverser::manifest {
namespace {

constexpr absl::string_view kBom = "\xEF\xBB\xBF";

// The line without its terminator, nor a byte-order mark at its start (which YAML readers skip
// there, at the start of any line).
absl::string_view Body(absl::string_view line) {
  if (absl::StartsWith(line, kBom)) line.remove_prefix(kBom.size());
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  return line;
}

bool IsBlankChar(char c) { return c == ' ' || c == '\t'; }

// `---` or `...` followed by a blank or the line end (YAML's c-document-start / -end).
bool IsMarker(absl::string_view line, absl::string_view marker) {
  absl::string_view body = Body(line);
  return absl::StartsWith(body, marker) && (body.size() == 3 || IsBlankChar(body[3]));
}

bool IsBlank(absl::string_view line) {
  for (char c : Body(line)) {
    if (!IsBlankChar(c)) return false;
  }
  return true;
}

// A line holding only a comment, at any indentation.
bool IsComment(absl::string_view line) {
  absl::string_view body = Body(line);
  size_t i = 0;
  while (i < body.size() && IsBlankChar(body[i])) ++i;
  return i < body.size() && body[i] == '#';
}

// Lines that are no document content outside a document: comments, blanks, directives and
// extra `...` markers.
bool IsStreamTrivia(absl::string_view line) {
  return IsBlank(line) || IsComment(line) || absl::StartsWith(Body(line), "%") ||
         IsMarker(line, "...");
}

// `...`, or a directive: a reader ends the document at a `%` in column 0 as well.
bool EndsDocument(absl::string_view line) {
  return IsMarker(line, "...") || absl::StartsWith(Body(line), "%");
}

// A `---` line carrying the start of the document's content (`--- {a: 1}`, `--- |`), not only
// blanks or a comment.
bool MarkerHasContent(absl::string_view line) {
  absl::string_view rest = Body(line).substr(3);
  size_t i = 0;
  while (i < rest.size() && IsBlankChar(rest[i])) ++i;
  return i < rest.size() && rest[i] != '#';
}

// Lines with their terminators ("\n", "\r\n" or a lone "\r", as YAML reads them).
std::vector<absl::string_view> Lines(absl::string_view text) {
  std::vector<absl::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || text[i] == '\r') {
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      lines.push_back(text.substr(start, i + 1 - start));
      start = i + 1;
    }
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

}  // namespace

YamlDocuments YamlDocuments::Split(absl::string_view text) {
  YamlDocuments out;
  if (absl::StartsWith(text, kBom)) {
    out.bom_ = true;
    text.remove_prefix(kBom.size());
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      out.newline_ = "\n";
      break;
    }
    if (text[i] == '\r') {
      out.newline_ = i + 1 < text.size() && text[i + 1] == '\n' ? "\r\n" : "\r";
      break;
    }
  }

  enum class State { kPreamble, kHead, kContent, kEnded };
  State state = State::kPreamble;
  // The content lines of the open document, so its trailing comments can become its tail.
  std::vector<absl::string_view> content;
  auto close_content = [&] {
    if (content.empty()) return;
    // The trailing run of column-0 comments and blank lines, from its first comment on.
    size_t end = content.size();
    while (end > 0 &&
           (IsBlank(content[end - 1]) || absl::StartsWith(Body(content[end - 1]), "#"))) {
      --end;
    }
    while (end < content.size() && IsBlank(content[end])) ++end;
    Document& doc = out.documents_.back();
    std::string tail;
    for (size_t i = 0; i < content.size(); ++i) {
      absl::StrAppend(i < end ? &doc.content : &tail, content[i]);
    }
    doc.tail = absl::StrCat(tail, doc.tail);
    content.clear();
  };
  auto start_document = [&] {
    close_content();
    out.documents_.emplace_back();
  };

  for (absl::string_view line : Lines(text)) {
    if (IsMarker(line, "---")) {
      start_document();
      if (MarkerHasContent(line)) {
        content.push_back(line);
        state = State::kContent;
      } else {
        absl::StrAppend(&out.documents_.back().head, line);
        state = State::kHead;
      }
      continue;
    }
    switch (state) {
      case State::kPreamble:
      case State::kEnded:
        if (IsStreamTrivia(line)) {
          absl::StrAppend(state == State::kPreamble ? &out.preamble_ : &out.documents_.back().tail,
                          line);
        } else {
          // A document without `---` (the first, or one after `...`).
          start_document();
          content.push_back(line);
          state = State::kContent;
        }
        break;
      case State::kHead:
        if (EndsDocument(line)) {
          absl::StrAppend(&out.documents_.back().tail, line);
          state = State::kEnded;
        } else if (IsBlank(line) || IsComment(line)) {
          absl::StrAppend(&out.documents_.back().head, line);
        } else {
          content.push_back(line);
          state = State::kContent;
        }
        break;
      case State::kContent:
        if (EndsDocument(line)) {
          close_content();
          absl::StrAppend(&out.documents_.back().tail, line);
          state = State::kEnded;
        } else {
          content.push_back(line);
        }
        break;
    }
  }
  close_content();
  return out;
}

size_t YamlDocuments::CountNonEmpty() const {
  size_t count = 0;
  for (const Document& doc : documents_) count += !doc.removed && !doc.content.empty();
  return count;
}

std::string YamlDocuments::ToFileNewlines(absl::string_view yaml) const {
  if (newline_ == "\n") return std::string(yaml);
  std::string out;
  out.reserve(yaml.size() + yaml.size() / 16);
  for (char c : yaml) {
    if (c == '\n') {
      out += newline_;
    } else {
      out += c;
    }
  }
  return out;
}

bool YamlDocuments::Replace(size_t i, absl::string_view yaml) {
  Document& doc = documents_[i];
  std::string content = ToFileNewlines(yaml);
  if (doc.content == content) return false;
  if (doc.head.empty() && IsMarker(doc.content, "---")) doc.head = absl::StrCat("---", newline_);
  // A null document on the file's last line ("---" and no line break after it) gets one, so
  // the new content starts a line of its own instead of running on in the marker's comment.
  if (!doc.head.empty() && doc.head.back() != '\n' && doc.head.back() != '\r') {
    doc.head += newline_;
  }
  doc.content = std::move(content);
  return true;
}

void YamlDocuments::Remove(size_t i) { documents_[i].removed = true; }

size_t YamlDocuments::Append(absl::string_view yaml) {
  // The bytes so far, from the end: does the last of them end a line?
  const std::string* last = &preamble_;
  for (const Document& doc : documents_) {
    if (doc.removed) continue;
    for (const std::string* part : {&doc.head, &doc.content, &doc.tail}) {
      if (!part->empty()) last = part;
    }
  }
  Document doc;
  doc.content = ToFileNewlines(yaml);
  if (!last->empty()) {
    const bool ends_line = last->back() == '\n' || last->back() == '\r';
    doc.head = absl::StrCat(ends_line ? "" : newline_, "---", newline_);
  }
  documents_.push_back(std::move(doc));
  return documents_.size() - 1;
}

std::string YamlDocuments::Text() const {
  std::string out;
  if (bom_) absl::StrAppend(&out, kBom);
  out += preamble_;
  for (const Document& doc : documents_) {
    if (doc.removed) continue;
    absl::StrAppend(&out, doc.head, doc.content, doc.tail);
  }
  return out;
}

}  // namespace reverser::manifest
