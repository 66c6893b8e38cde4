#include "libs/gotemplate/template.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/gotemplate/funcs.h"

namespace reverser::gotemplate {
namespace {

// Nesting (Limits::max_nesting) keeps the parser's and the executor's recursion, and so the
// stack, bounded for hostile templates. Go has no such limit, but no sane template comes near it.

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsIdentStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsIdentChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// ---------------------------------------------------------------------------------------------
// Tokens of one action.

enum class Tok {
  kField,       // `.` or `.A.B` (fields holds the chain; empty for `.`)
  kVariable,    // `$` or `$x`, optionally followed by a chain `.A.B`
  kIdentifier,  // function name or keyword
  kString,
  kNumber,
  kBool,
  kPipe,
  kLeftParen,
  kRightParen,
  kComma,
  kDeclare,  // :=
  kAssign,   // =
};

struct Token {
  Tok kind = Tok::kPipe;
  size_t offset = 0;        // into the template source, for positions
  size_t chain_offset = 0;  // where Go positions the operand (see LexAction)
  std::string source;       // the token as written
  std::string text;  // source text (identifier / variable name / number / decoded string)
  std::vector<std::string> fields;
  int64_t number = 0;
  bool boolean = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parse tree.

struct Pipeline;

struct Operand {
  enum class Kind { kDot, kField, kVariable, kString, kNumber, kBool, kFunction, kPipeline };
  Kind kind;
  size_t offset = 0;
  std::string source;  // for "executing ... at <...>"
  std::string name;    // variable or function name
  std::vector<std::string> fields;
  Value literal;
  std::shared_ptr<Pipeline> pipeline;
};

struct Command {
  size_t offset = 0;  // of its first token, where Go positions a command
  std::vector<Operand> operands;
};

struct Pipeline {
  size_t offset = 0;
  std::vector<std::string> declarations;  // `$x :=` / `$i, $e :=`
  bool assign = false;                    // `$x = ...` (re-assignment)
  std::vector<Command> commands;
};

struct Template::Node {
  enum class Kind { kList, kText, kAction, kIf, kWith, kRange };
  Kind kind = Kind::kList;
  size_t offset = 0;            // kText: where the text starts
  std::string text;             // kText
  Pipeline pipeline;            // kAction / kIf / kWith / kRange
  std::vector<Node> children;   // kList; the body for kIf / kWith / kRange
  std::vector<Node> otherwise;  // the {{else}} part
};

namespace {

using Node = Template::Node;

// Go's String() forms, used in "executing ... at <...>".
std::string PipelineString(const Pipeline& pipe);

std::string CommandString(const Command& command) {
  std::string out;
  for (const Operand& operand : command.operands) {
    if (!out.empty()) out += " ";
    out += operand.source;
  }
  return out;
}

std::string PipelineString(const Pipeline& pipe) {
  std::string out;
  if (!pipe.declarations.empty()) {
    for (size_t i = 0; i < pipe.declarations.size(); ++i) {
      out += (i ? ", " : "") + pipe.declarations[i];
    }
    out += pipe.assign ? " = " : " := ";
  }
  for (size_t i = 0; i < pipe.commands.size(); ++i) {
    out += (i ? " | " : "") + CommandString(pipe.commands[i]);
  }
  return out;
}

// Maps a source offset to "name:line:col".
class Positions {
 public:
  Positions(std::string name, absl::string_view text) : name_(std::move(name)), text_(text) {}
  // Go's ErrorContext: "name:line:col" with a 1-based line and a 0-based byte column.
  std::string At(size_t offset) const {
    int line = 1, col = 0;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 0;
      } else {
        ++col;
      }
    }
    return absl::StrCat(name_, ":", line, ":", col);
  }
  // Go's parse errors name only the line: "template: name:line: message".
  absl::Status Error(size_t offset, absl::string_view message) const {
    int line = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) line += text_[i] == '\n';
    return absl::InvalidArgumentError(absl::StrCat("template: ", name_, ":", line, ": ", message));
  }
  const std::string& name() const { return name_; }
  absl::string_view text() const { return text_; }

 private:
  std::string name_;
  absl::string_view text_;
};

// One `{{ ... }}` or a text run, after delimiter and trim handling.
struct Piece {
  bool is_action;
  size_t offset;  // of the text, or of the `{{`
  std::string text;
  std::vector<Token> tokens;
};

absl::StatusOr<std::string> DecodeQuoted(absl::string_view body, size_t offset,
                                         const Positions& pos) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      out.push_back(body[i]);
      continue;
    }
    if (++i >= body.size()) return pos.Error(offset, "unterminated quoted string");
    switch (body[i]) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case '\\': out.push_back('\\'); break;
      case '"': out.push_back('"'); break;
      case '\'': out.push_back('\''); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': {
        const std::string hex(body.substr(i + 1, 2));
        if (hex.size() != 2 || !absl::ascii_isxdigit(hex[0]) || !absl::ascii_isxdigit(hex[1])) {
          return pos.Error(offset, "invalid syntax in quoted string");
        }
        out.push_back(static_cast<char>(std::stoi(hex, nullptr, 16)));
        i += 2;
        break;
      }
      default:
        return pos.Error(offset, absl::StrCat("invalid escape \\", std::string(1, body[i]),
                                              " in quoted string"));
    }
  }
  return out;
}

// Lexes the inside of one action starting at `i`; stops at `}}` or ` -}}`.
// Returns the offset just after the closing delimiter and whether it trims the following text.
absl::StatusOr<std::pair<size_t, bool>> LexAction(absl::string_view s, size_t i,
                                                   const Positions& pos, size_t action_offset,
                                                   std::vector<Token>* tokens) {
  // Reads ".A.B..." at j; `starts` receives where each field begins.
  const auto read_chain = [&](size_t j, std::vector<std::string>* fields,
                              std::vector<size_t>* starts) {
    while (j < s.size() && s[j] == '.' && j + 1 < s.size() && IsIdentStart(s[j + 1])) {
      starts->push_back(j);
      size_t k = j + 1;
      while (k < s.size() && IsIdentChar(s[k])) ++k;
      fields->emplace_back(s.substr(j + 1, k - j - 1));
      j = k;
    }
    return j;
  };
  while (i < s.size()) {
    const char c = s[i];
    if (IsSpace(c)) {
      if (s.substr(i + 1, 3) == "-}}") return std::make_pair(i + 4, true);
      ++i;
      continue;
    }
    if (s.substr(i, 2) == "}}") return std::make_pair(i + 2, false);
    Token tok;
    tok.kind = Tok::kPipe;
    tok.offset = i;
    tok.chain_offset = i;
    if (c == '|') {
      tok.kind = Tok::kPipe, ++i;
    } else if (c == '(') {
      tok.kind = Tok::kLeftParen, ++i;
    } else if (c == ')') {
      tok.kind = Tok::kRightParen, ++i;
      if (i < s.size() && s[i] == '.') {
        return pos.Error(i, "field access on a parenthesised pipeline is not supported");
      }
    } else if (c == ',') {
      tok.kind = Tok::kComma, ++i;
    } else if (s.substr(i, 2) == ":=") {
      tok.kind = Tok::kDeclare, i += 2;
    } else if (c == '=') {
      tok.kind = Tok::kAssign, ++i;
    } else if (c == '.') {
      tok.kind = Tok::kField;
      if (i + 1 < s.size() && IsIdentStart(s[i + 1])) {
        // Go positions a chain ".A.B" at its first chained field, ".B".
        std::vector<size_t> starts;
        i = read_chain(i, &tok.fields, &starts);
        if (starts.size() >= 2) tok.chain_offset = starts[1];
      } else if (i + 1 < s.size() && absl::ascii_isdigit(s[i + 1])) {
        return pos.Error(i, "floating-point numbers are not supported");
      } else {
        ++i;
      }
    } else if (c == '$') {
      tok.kind = Tok::kVariable;
      size_t k = i + 1;
      while (k < s.size() && IsIdentChar(s[k])) ++k;
      tok.text = std::string(s.substr(i, k - i));
      std::vector<size_t> starts;
      i = read_chain(k, &tok.fields, &starts);
      if (!starts.empty()) tok.chain_offset = starts[0];  // "$x.A" is positioned at ".A"
    } else if (c == '"' || c == '`') {
      tok.kind = Tok::kString;
      const size_t close = c == '"' ? [&] {
        for (size_t k = i + 1; k < s.size(); ++k) {
          if (s[k] == '\\') { ++k; continue; }
          if (s[k] == '"' || s[k] == '\n') return k;
        }
        return absl::string_view::npos;
      }() : s.find('`', i + 1);
      if (close == absl::string_view::npos || s[close] != c) {
        return pos.Error(i, c == '"' ? "unterminated quoted string" : "unterminated raw quoted string");
      }
      if (c == '"') {
        ASSIGN_OR_RETURN(tok.text, DecodeQuoted(s.substr(i + 1, close - i - 1), i, pos));
      } else {
        tok.text = std::string(s.substr(i + 1, close - i - 1));
      }
      i = close + 1;
    } else if (absl::ascii_isdigit(c) ||
               ((c == '-' || c == '+') && i + 1 < s.size() && absl::ascii_isdigit(s[i + 1]))) {
      tok.kind = Tok::kNumber;
      size_t k = i + 1;
      while (k < s.size() && (absl::ascii_isalnum(s[k]) || s[k] == '.' || s[k] == '_')) ++k;
      tok.text = std::string(s.substr(i, k - i));
      errno = 0;
      char* end = nullptr;
      const long long value = std::strtoll(tok.text.c_str(), &end, 10);
      if (errno != 0 || end == nullptr || *end != '\0') {
        return pos.Error(i, absl::StrCat("bad number syntax: \"", tok.text, "\""));
      }
      tok.number = value;
      i = k;
    } else if (IsIdentStart(c)) {
      size_t k = i + 1;
      while (k < s.size() && IsIdentChar(s[k])) ++k;
      tok.text = std::string(s.substr(i, k - i));
      tok.kind = Tok::kIdentifier;
      if (tok.text == "true" || tok.text == "false") {
        tok.kind = Tok::kBool;
        tok.boolean = tok.text == "true";
      }
      i = k;
    } else {
      return pos.Error(i, absl::StrCat("unexpected \"", std::string(1, c), "\" in command"));
    }
    tok.source = std::string(s.substr(tok.offset, i - tok.offset));
    tokens->push_back(std::move(tok));
  }
  return pos.Error(action_offset, "unclosed action");
}

absl::StatusOr<std::vector<Piece>> Lex(absl::string_view s, const Positions& pos) {
  std::vector<Piece> pieces;
  size_t i = 0;
  bool trim_next_text = false;
  while (i <= s.size()) {
    const size_t open = s.find("{{", i);
    std::string text(s.substr(i, open == absl::string_view::npos ? absl::string_view::npos
                                                                    : open - i));
    const bool trim_left = open != absl::string_view::npos && open + 3 < s.size() &&
                           s[open + 2] == '-' && IsSpace(s[open + 3]);
    if (trim_next_text) {
      text.erase(0, text.find_first_not_of(" \t\r\n") == std::string::npos
                        ? text.size()
                        : text.find_first_not_of(" \t\r\n"));
    }
    if (trim_left) {
      const size_t last = text.find_last_not_of(" \t\r\n");
      text.erase(last == std::string::npos ? 0 : last + 1);
    }
    if (!text.empty()) pieces.push_back({false, i, std::move(text), {}});
    if (open == absl::string_view::npos) break;

    size_t body = open + 2 + (trim_left ? 2 : 0);
    // Comments: `{{/* ... */}}`, optionally with trim markers.
    size_t probe = body;
    while (trim_left && probe < s.size() && IsSpace(s[probe])) ++probe;
    if (s.substr(probe, 2) == "/*") {
      const size_t close = s.find("*/", probe + 2);
      if (close == absl::string_view::npos) return pos.Error(open, "unclosed comment");
      size_t after = close + 2;
      if (s.substr(after, 2) == "}}") {
        i = after + 2;
        trim_next_text = false;
      } else if (after < s.size() && IsSpace(s[after]) && s.substr(after + 1, 3) == "-}}") {
        i = after + 4;
        trim_next_text = true;
      } else {
        return pos.Error(open, "comment ends before closing delimiter");
      }
      continue;
    }
    Piece action{true, open, "", {}};
    ASSIGN_OR_RETURN(auto end, LexAction(s, body, pos, open, &action.tokens));
    i = end.first;
    trim_next_text = end.second;
    if (action.tokens.empty()) return pos.Error(open, "missing value for command");
    pieces.push_back(std::move(action));
  }
  return pieces;
}

// ---------------------------------------------------------------------------------------------
// Parser.

class Parser {
 public:
  Parser(std::vector<Piece> pieces, const Positions& pos, int max_nesting)
      : pieces_(std::move(pieces)), max_nesting_(max_nesting), pos_(pos) {}

  absl::StatusOr<Node> ParseTemplate() {
    Node root;
    root.kind = Node::Kind::kList;
    std::string terminator;
    size_t terminator_offset = 0;
    RETURN_IF_ERROR(ParseList(&root.children, &terminator, &terminator_offset));
    if (!terminator.empty()) {
      return pos_.Error(terminator_offset, absl::StrCat("unexpected {{", terminator, "}}"));
    }
    return root;
  }

 private:
  // Parses nodes until {{end}}, {{else ...}} or the end of input; reports which one stopped it.
  // After an {{else}}, `next_` points at the else's remaining tokens via else_tokens_.
  absl::Status ParseList(std::vector<Node>* out, std::string* terminator, size_t* offset) {
    terminator->clear();
    while (next_ < pieces_.size()) {
      Piece& piece = pieces_[next_++];
      if (!piece.is_action) {
        Node text;
        text.kind = Node::Kind::kText;
        text.offset = piece.offset;
        text.text = piece.text;
        out->push_back(std::move(text));
        continue;
      }
      const Token& first = piece.tokens.front();
      const std::string keyword = first.kind == Tok::kIdentifier ? first.text : "";
      if (keyword == "end" || keyword == "else") {
        if (keyword == "end" && piece.tokens.size() > 1) {
          return pos_.Error(piece.tokens[1].offset, "unexpected token in end");
        }
        *terminator = keyword;
        *offset = piece.offset;
        else_rest_.assign(piece.tokens.begin() + 1, piece.tokens.end());
        return absl::OkStatus();
      }
      if (keyword == "if" || keyword == "with" || keyword == "range") {
        Node node;
        RETURN_IF_ERROR(ParseControl(keyword, piece.offset,
                                     std::vector<Token>(piece.tokens.begin() + 1,
                                                        piece.tokens.end()),
                                     &node));
        out->push_back(std::move(node));
        continue;
      }
      if (keyword == "define" || keyword == "template" || keyword == "block" ||
          keyword == "break" || keyword == "continue" || keyword == "nil") {
        return pos_.Error(first.offset, absl::StrCat("{{", keyword, "}} is not supported"));
      }
      Node action;
      action.kind = Node::Kind::kAction;
      RETURN_IF_ERROR(ParsePipeline(piece.tokens, piece.offset, /*allow_decl=*/true,
                                    /*range_decl=*/false, &action.pipeline));
      out->push_back(std::move(action));
    }
    return absl::OkStatus();
  }

  absl::Status ParseControl(const std::string& keyword, size_t offset,
                            const std::vector<Token>& tokens, Node* node) {
    if (nesting_ >= max_nesting_) return pos_.Error(offset, "template nested too deeply");
    ++nesting_;
    absl::Status status = ParseControlBody(keyword, offset, tokens, node);
    --nesting_;
    return status;
  }

  absl::Status ParseControlBody(const std::string& keyword, size_t offset,
                                const std::vector<Token>& tokens, Node* node) {
    node->kind = keyword == "if"     ? Node::Kind::kIf
                 : keyword == "with" ? Node::Kind::kWith
                                     : Node::Kind::kRange;
    if (tokens.empty()) return pos_.Error(offset, absl::StrCat("missing value for ", keyword));
    const size_t scope = variables_.size();
    RETURN_IF_ERROR(ParsePipeline(tokens, offset, /*allow_decl=*/true,
                                  /*range_decl=*/keyword == "range", &node->pipeline));
    std::string terminator;
    size_t end_offset = 0;
    RETURN_IF_ERROR(ParseList(&node->children, &terminator, &end_offset));
    if (terminator.empty()) return pos_.Error(pos_.text().size(), "unexpected EOF");
    if (terminator == "else") {
      std::vector<Token> rest = std::move(else_rest_);
      if (!rest.empty()) {
        // `{{else if ...}}` / `{{else with ...}}`: a nested control sharing this {{end}}.
        if (rest.front().kind != Tok::kIdentifier ||
            (rest.front().text != "if" && rest.front().text != "with") || keyword == "range") {
          return pos_.Error(rest.front().offset, "unexpected token in else");
        }
        Node nested;
        RETURN_IF_ERROR(ParseControl(rest.front().text, end_offset,
                                     std::vector<Token>(rest.begin() + 1, rest.end()), &nested));
        node->otherwise.push_back(std::move(nested));
        variables_.resize(scope);
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(ParseList(&node->otherwise, &terminator, &end_offset));
      if (terminator != "end") {
        return pos_.Error(end_offset, terminator.empty()
                                          ? "unexpected EOF"
                                          : "expected end; found {{else}}");
      }
    }
    variables_.resize(scope);
    return absl::OkStatus();
  }

  absl::Status ParsePipeline(const std::vector<Token>& tokens, size_t offset, bool allow_decl,
                             bool range_decl, Pipeline* pipe) {
    pipe->offset = offset;
    size_t i = 0;
    // Declarations: `$x :=`, `$x =`, and for range `$i, $e :=`.
    if (allow_decl && !tokens.empty() && tokens[0].kind == Tok::kVariable &&
        tokens[0].fields.empty() && tokens.size() > 1) {
      if (tokens[1].kind == Tok::kDeclare || tokens[1].kind == Tok::kAssign) {
        pipe->declarations.push_back(tokens[0].text);
        pipe->assign = tokens[1].kind == Tok::kAssign;
        i = 2;
      } else if (range_decl && tokens[1].kind == Tok::kComma && tokens.size() > 3 &&
                 tokens[2].kind == Tok::kVariable && tokens[3].kind == Tok::kDeclare) {
        pipe->declarations = {tokens[0].text, tokens[2].text};
        i = 4;
      }
    }
    if (pipe->assign && !IsDefined(pipe->declarations[0])) {
      return pos_.Error(tokens[0].offset,
                        absl::StrCat("undefined variable \"", pipe->declarations[0], "\""));
    }
    std::vector<Token> rest(tokens.begin() + i, tokens.end());
    size_t j = 0;
    RETURN_IF_ERROR(ParseCommands(rest, &j, offset, pipe, /*in_parens=*/false));
    if (!pipe->assign) {
      for (const std::string& name : pipe->declarations) variables_.push_back(name);
    }
    return absl::OkStatus();
  }

  absl::Status ParseCommands(const std::vector<Token>& tokens, size_t* i, size_t offset,
                             Pipeline* pipe, bool in_parens) {
    Command command;
    while (*i < tokens.size()) {
      const Token& tok = tokens[*i];
      if (tok.kind == Tok::kRightParen) {
        if (!in_parens) return pos_.Error(tok.offset, "unexpected right paren");
        break;
      }
      if (tok.kind == Tok::kPipe) {
        if (command.operands.empty()) return pos_.Error(tok.offset, "unexpected \"|\" in command");
        pipe->commands.push_back(std::move(command));
        command = Command();
        ++*i;
        // Go accepts (and ignores) a pipe that ends the action: `{{.A | }}`.
        if (!in_parens && *i == tokens.size()) return absl::OkStatus();
        continue;
      }
      if (command.operands.empty()) command.offset = tok.offset;
      Operand operand;
      RETURN_IF_ERROR(ParseOperand(tokens, i, &operand));
      command.operands.push_back(std::move(operand));
    }
    if (command.operands.empty()) {
      return pos_.Error(*i < tokens.size() ? tokens[*i].offset : offset, "missing command");
    }
    pipe->commands.push_back(std::move(command));
    return absl::OkStatus();
  }

  absl::Status ParseOperand(const std::vector<Token>& tokens, size_t* i, Operand* operand) {
    const Token& tok = tokens[(*i)++];
    operand->offset = tok.chain_offset;
    operand->fields = tok.fields;
    switch (tok.kind) {
      case Tok::kField:
        operand->kind = tok.fields.empty() ? Operand::Kind::kDot : Operand::Kind::kField;
        operand->source = tok.fields.empty() ? "." : "." + Join(tok.fields);
        return absl::OkStatus();
      case Tok::kVariable:
        if (!IsDefined(tok.text)) {
          return pos_.Error(tok.offset, absl::StrCat("undefined variable \"", tok.text, "\""));
        }
        operand->kind = Operand::Kind::kVariable;
        operand->name = tok.text;
        operand->source = tok.fields.empty() ? tok.text : tok.text + "." + Join(tok.fields);
        return absl::OkStatus();
      case Tok::kString:
        operand->kind = Operand::Kind::kString;
        operand->literal = Value(tok.text);
        operand->source = tok.source;
        return absl::OkStatus();
      case Tok::kNumber:
        operand->kind = Operand::Kind::kNumber;
        operand->literal = Value(tok.number);
        operand->source = tok.text;
        return absl::OkStatus();
      case Tok::kBool:
        operand->kind = Operand::Kind::kBool;
        operand->literal = Value(tok.boolean);
        operand->source = tok.text;
        return absl::OkStatus();
      case Tok::kIdentifier:
        if (!IsBuiltinFunction(tok.text)) {
          return pos_.Error(tok.offset, absl::StrCat("function \"", tok.text, "\" not defined"));
        }
        operand->kind = Operand::Kind::kFunction;
        operand->name = tok.text;
        operand->source = tok.text;
        return absl::OkStatus();
      case Tok::kLeftParen: {
        if (nesting_ >= max_nesting_) return pos_.Error(tok.offset, "template nested too deeply");
        ++nesting_;
        operand->kind = Operand::Kind::kPipeline;
        operand->pipeline = std::make_shared<Pipeline>();
        operand->pipeline->offset = tok.offset;
        RETURN_IF_ERROR(ParseCommands(tokens, i, tok.offset, operand->pipeline.get(), true));
        if (*i >= tokens.size() || tokens[*i].kind != Tok::kRightParen) {
          return pos_.Error(tok.offset, "unclosed left paren");
        }
        ++*i;
        --nesting_;
        operand->source = "(" + PipelineString(*operand->pipeline) + ")";
        return absl::OkStatus();
      }
      default:
        return pos_.Error(tok.offset, "unexpected token in operand");
    }
  }

  bool IsDefined(const std::string& name) const {
    for (const std::string& v : variables_) {
      if (v == name) return true;
    }
    return false;
  }

  static std::string Join(const std::vector<std::string>& fields) {
    std::string out;
    for (size_t k = 0; k < fields.size(); ++k) out += (k ? "." : "") + fields[k];
    return out;
  }

  std::vector<Piece> pieces_;
  size_t next_ = 0;
  std::vector<Token> else_rest_;
  std::vector<std::string> variables_ = {"$"};
  int nesting_ = 0;
  const int max_nesting_;
  const Positions& pos_;
};

// ---------------------------------------------------------------------------------------------
// Execution.

class Executor {
 public:
  Executor(const Positions& pos, const Value& root, const Limits& limits)
      : pos_(pos), limits_(limits) {
    vars_.push_back({"$", root});
  }

  absl::Status Walk(const std::vector<Node>& nodes, const Value& dot, std::string* out) {
    for (const Node& node : nodes) RETURN_IF_ERROR(WalkOne(node, dot, out));
    return absl::OkStatus();
  }

 private:
  absl::Status WalkOne(const Node& node, const Value& dot, std::string* out) {
    switch (node.kind) {
      case Node::Kind::kList:
        return Walk(node.children, dot, out);
      case Node::Kind::kText:
        if (!Produce(node.text.size())) return OutputExhausted(node.offset, "text");
        out->append(node.text);
        return absl::OkStatus();
      case Node::Kind::kAction: {
        RETURN_IF_ERROR(Step(node.pipeline));
        ASSIGN_OR_RETURN(Value value, EvalPipeline(node.pipeline, dot));
        if (node.pipeline.declarations.empty()) {
          const std::string text = value.is_null() ? "<no value>" : value.ToString();
          if (!Produce(text.size())) {
            return OutputExhausted(node.pipeline.offset, PipelineString(node.pipeline));
          }
          out->append(text);
        } else {
          Bind(node.pipeline, value);
        }
        return absl::OkStatus();
      }
      case Node::Kind::kIf:
      case Node::Kind::kWith: {
        RETURN_IF_ERROR(Step(node.pipeline));
        const size_t scope = vars_.size();
        ASSIGN_OR_RETURN(Value value, EvalPipeline(node.pipeline, dot));
        if (!node.pipeline.declarations.empty()) Bind(node.pipeline, value);
        absl::Status status;
        if (value.Truthy()) {
          status = Walk(node.children, node.kind == Node::Kind::kWith ? value : dot, out);
        } else {
          status = Walk(node.otherwise, dot, out);
        }
        vars_.resize(scope);
        return status;
      }
      case Node::Kind::kRange:
        return WalkRange(node, dot, out);
    }
    return absl::OkStatus();
  }

  absl::Status WalkRange(const Node& node, const Value& dot, std::string* out) {
    RETURN_IF_ERROR(Step(node.pipeline));
    const size_t scope = vars_.size();
    Pipeline pipe = node.pipeline;
    const std::vector<std::string> decls = pipe.declarations;
    pipe.declarations.clear();
    ASSIGN_OR_RETURN(Value value, EvalPipeline(pipe, dot));
    const auto iterate = [&](const Value& key, const Value& element) -> absl::Status {
      if (++iterations_ > limits_.max_iterations) {
        return Exhausted(
            node.pipeline.offset, absl::StrCat("range ", PipelineString(pipe)),
            absl::StrCat("range iterations exceed the limit of ", limits_.max_iterations));
      }
      RETURN_IF_ERROR(Step(node.pipeline));
      vars_.resize(scope);
      if (decls.size() == 1) vars_.push_back({decls[0], element});
      if (decls.size() == 2) {
        vars_.push_back({decls[0], key});
        vars_.push_back({decls[1], element});
      }
      return Walk(node.children, element, out);
    };
    absl::Status status;
    if (value.is_list()) {
      for (size_t k = 0; k < value.list().size() && status.ok(); ++k) {
        status = iterate(Value(static_cast<int64_t>(k)), value.list()[k]);
      }
    } else if (value.is_map()) {
      for (auto it = value.map().begin(); it != value.map().end() && status.ok(); ++it) {
        status = iterate(Value(it->first), it->second);
      }
    } else if (!value.is_null()) {
      status = Fail(node.pipeline.commands.back().operands.front(),
                    absl::StrCat("range can't iterate over ", value.ToString()));
    }
    vars_.resize(scope);
    if (status.ok() && !value.Truthy()) status = Walk(node.otherwise, dot, out);
    vars_.resize(scope);
    return status;
  }

  void Bind(const Pipeline& pipe, const Value& value) {
    if (pipe.assign) {
      for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) {
        if (it->first == pipe.declarations[0]) {
          it->second = value;
          return;
        }
      }
    }
    vars_.push_back({pipe.declarations[0], value});
  }

  absl::StatusOr<Value> EvalPipeline(const Pipeline& pipe, const Value& dot) {
    std::optional<Value> result;
    for (const Command& command : pipe.commands) {
      ASSIGN_OR_RETURN(Value value, EvalCommand(command, dot, result));
      result = std::move(value);
    }
    return result.value_or(Value());
  }

  absl::StatusOr<Value> EvalCommand(const Command& command, const Value& dot,
                                    const std::optional<Value>& piped) {
    const Operand& head = command.operands.front();
    if (head.kind == Operand::Kind::kFunction) {
      RETURN_IF_ERROR(Step(command));
      std::vector<Value> args;
      for (size_t k = 1; k < command.operands.size(); ++k) {
        ASSIGN_OR_RETURN(Value arg, EvalOperand(command.operands[k], dot));
        args.push_back(std::move(arg));
      }
      if (piped) args.push_back(*piped);
      if (head.name == "eq" || head.name == "ne") {
        // Comparing long strings is work the step count would not see.
        size_t compared = 0;
        for (const Value& arg : args) compared += arg.is_string() ? arg.str().size() : 0;
        RETURN_IF_ERROR(Step(command, static_cast<int64_t>(compared / 1024)));
      }
      const int64_t room = std::max<int64_t>(limits_.max_output_bytes - produced_, 0);
      absl::StatusOr<Value> result = CallBuiltin(head.name, args, static_cast<size_t>(room));
      if (result.ok() && (head.name == "print" || head.name == "printf") &&
          !Produce(result->str().size())) {
        return OutputExhausted(command.offset, CommandString(command));
      }
      if (!result.ok()) {
        // Go reports a failing call at the whole command, an argument-count error at the name.
        if (absl::StartsWith(result.status().message(), "error calling ")) {
          return Fail(command.offset, CommandString(command), result.status().message());
        }
        return Fail(head, result.status().message());
      }
      return result;
    }
    if (command.operands.size() > 1 || piped) {
      if (head.kind == Operand::Kind::kField) {
        return Fail(head, absl::StrCat(head.fields.back(), " is not a method but has arguments"));
      }
      return Fail(head, absl::StrCat("can't give argument to non-function ", head.source));
    }
    return EvalOperand(head, dot);
  }

  absl::StatusOr<Value> EvalOperand(const Operand& operand, const Value& dot) {
    switch (operand.kind) {
      case Operand::Kind::kDot:
        return dot;
      case Operand::Kind::kField:
        return EvalChain(operand, dot);
      case Operand::Kind::kVariable:
        for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) {
          if (it->first == operand.name) return EvalChain(operand, it->second);
        }
        return Fail(operand, absl::StrCat("undefined variable: ", operand.name));
      case Operand::Kind::kString:
      case Operand::Kind::kNumber:
      case Operand::Kind::kBool:
        return operand.literal;
      case Operand::Kind::kFunction: {
        // A bare function name as an argument is a call with no arguments, as in Go.
        absl::StatusOr<Value> result = CallBuiltin(operand.name, {});
        if (!result.ok()) return Fail(operand, result.status().message());
        return result;
      }
      case Operand::Kind::kPipeline:
        return EvalPipeline(*operand.pipeline, dot);
    }
    return Value();
  }

  absl::StatusOr<Value> EvalChain(const Operand& operand, Value value) {
    for (const std::string& field : operand.fields) {
      if (value.is_map()) {
        const auto it = value.map().find(field);
        if (it == value.map().end()) {
          return Fail(operand, absl::StrCat("map has no entry for key \"", field, "\""));
        }
        Value next = it->second;
        value = std::move(next);
      } else if (value.is_null()) {
        return Fail(operand, absl::StrCat("nil pointer evaluating interface {}.", field));
      } else {
        return Fail(operand, absl::StrCat("can't evaluate field ", field, " in type ",
                                          value.TypeName()));
      }
    }
    return value;
  }

  // One evaluation step (or `cost` of them) at a pipeline or command, named only on failure.
  absl::Status Step(const Pipeline& pipe) {
    if (++steps_ <= limits_.max_steps) return absl::OkStatus();
    return StepsExhausted(pipe.offset, PipelineString(pipe));
  }
  absl::Status Step(const Command& command, int64_t cost = 1) {
    steps_ += cost;
    if (steps_ <= limits_.max_steps) return absl::OkStatus();
    return StepsExhausted(command.offset, CommandString(command));
  }
  absl::Status StepsExhausted(size_t offset, absl::string_view context) const {
    return Exhausted(offset, context,
                     absl::StrCat("evaluation steps exceed the limit of ", limits_.max_steps));
  }

  // `bytes` more written or built; false beyond the limit.
  bool Produce(size_t bytes) {
    produced_ += static_cast<int64_t>(bytes);
    return produced_ <= limits_.max_output_bytes;
  }
  absl::Status OutputExhausted(size_t offset, absl::string_view context) const {
    return Exhausted(
        offset, context,
        absl::StrCat("output exceeds the limit of ", limits_.max_output_bytes, " bytes"));
  }

  absl::Status Exhausted(size_t offset, absl::string_view context,
                         absl::string_view message) const {
    return absl::ResourceExhaustedError(absl::StrCat("template: ", pos_.At(offset),
                                                     ": executing \"", pos_.name(), "\" at <",
                                                     context, ">: ", message));
  }

  absl::Status Fail(size_t offset, absl::string_view context, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("template: ", pos_.At(offset),
                                                   ": executing \"", pos_.name(), "\" at <",
                                                   context, ">: ", message));
  }

  absl::Status Fail(const Operand& operand, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("template: ", pos_.At(operand.offset),
                                                   ": executing \"", pos_.name(), "\" at <",
                                                   operand.source, ">: ", message));
  }

  const Positions& pos_;
  const Limits limits_;
  std::vector<std::pair<std::string, Value>> vars_;
  int64_t iterations_ = 0;
  int64_t steps_ = 0;
  int64_t produced_ = 0;  // output plus strings built
};

}  // namespace

absl::StatusOr<Template> Template::Parse(absl::string_view name, absl::string_view text,
                                         const Limits& limits) {
  const Positions pos(std::string(name), text);
  ASSIGN_OR_RETURN(std::vector<Piece> pieces, Lex(text, pos));
  Parser parser(std::move(pieces), pos, limits.max_nesting);
  ASSIGN_OR_RETURN(Node root, parser.ParseTemplate());
  return Template(std::string(name), std::make_shared<const std::string>(text),
                  std::make_shared<const Node>(std::move(root)), limits);
}

absl::StatusOr<std::string> Template::Execute(const Value& data) const {
  std::string out;
  const Positions pos(name_, *source_);  // execution errors report source positions too
  Executor executor(pos, data, limits_);
  RETURN_IF_ERROR(executor.Walk(root_->children, data, &out));
  return out;
}

absl::StatusOr<std::string> Render(absl::string_view name, absl::string_view text,
                                   const Value& data, const Limits& limits) {
  ASSIGN_OR_RETURN(Template tmpl, Template::Parse(name, text, limits));
  return tmpl.Execute(data);
}

}  // namespace reverser::gotemplate
