#include "tools/kube-sim/cel.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "re2/re2.h"

namespace reverser::kubesim::cel {

enum class NodeKind {
  kLiteral,
  kIdent,
  kSelect,
  kHas,
  kIndex,
  kCall,
  kList,
  kUnary,
  kBinary,
  kTernary
};

struct Node {
  NodeKind kind = NodeKind::kLiteral;
  Json literal;
  // kIdent: the name; kSelect/kHas: the field; kCall: the function; kUnary/kBinary: the operator;
  // a macro's bound variable is args[0]'s name.
  std::string name;
  bool receiver = false;  // kCall: args[0] is the receiver
  std::vector<std::unique_ptr<Node>> args;
};

namespace {

// Bounds for the recursive-descent parser and the recursive evaluator: nesting (cel-go limits
// rule nesting similarly) and expression size (real servers bound a rule's cost instead).
constexpr int kMaxNesting = 100;
constexpr int kMaxNodes = 2000;

enum class Tok { kEnd, kIdent, kInt, kUint, kDouble, kString, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier, punctuation, or decoded string
  Json value;        // numbers
  int column = 1;
};

absl::Status SyntaxError(int column, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("ERROR: <input>:1:", column, ": Syntax error: ", what));
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view src) {
  std::vector<Token> out;
  size_t i = 0;
  auto column = [&](size_t at) { return static_cast<int>(at) + 1; };
  while (i < src.size()) {
    char c = src[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    Token t;
    t.column = column(i);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() &&
             (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_')) {
        ++j;
      }
      std::string word(src.substr(i, j - i));
      bool raw =
          (word == "r" || word == "R") && j < src.size() && (src[j] == '"' || src[j] == '\'');
      if (!raw) {
        t.kind = Tok::kIdent;
        t.text = word;
        out.push_back(std::move(t));
        i = j;
        continue;
      }
      i = j;  // a raw string follows
      c = src[i];
      char quote = c;
      size_t end = src.find(quote, i + 1);
      if (end == absl::string_view::npos) return SyntaxError(t.column, "unterminated string");
      t.kind = Tok::kString;
      t.text = std::string(src.substr(i + 1, end - i - 1));
      out.push_back(std::move(t));
      i = end + 1;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < src.size() && std::isdigit(static_cast<unsigned char>(src[i + 1])))) {
      size_t j = i;
      bool hex = c == '0' && i + 1 < src.size() && (src[i + 1] == 'x' || src[i + 1] == 'X');
      bool is_double = false;
      if (hex) {
        j += 2;
        while (j < src.size() && HexDigit(src[j]) >= 0) ++j;
      } else {
        while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
        if (j < src.size() && src[j] == '.' && j + 1 < src.size() &&
            std::isdigit(static_cast<unsigned char>(src[j + 1]))) {
          is_double = true;
          ++j;
          while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
        }
        if (j < src.size() && (src[j] == 'e' || src[j] == 'E')) {
          size_t k = j + 1;
          if (k < src.size() && (src[k] == '+' || src[k] == '-')) ++k;
          if (k < src.size() && std::isdigit(static_cast<unsigned char>(src[k]))) {
            is_double = true;
            j = k;
            while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
          }
        }
      }
      std::string digits(src.substr(i, j - i));
      bool is_uint = !is_double && j < src.size() && (src[j] == 'u' || src[j] == 'U');
      if (is_double) {
        double d = 0;
        if (!absl::SimpleAtod(digits, &d)) return SyntaxError(t.column, "invalid double literal");
        t.kind = Tok::kDouble;
        t.value = d;
      } else {
        uint64_t u = 0;
        bool ok = hex ? absl::SimpleHexAtoi(digits.substr(2), &u) : absl::SimpleAtoi(digits, &u);
        if (!ok || (!is_uint && u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
          return SyntaxError(t.column, "invalid int literal");
        }
        t.kind = is_uint ? Tok::kUint : Tok::kInt;
        if (is_uint) {
          t.value = u;
          ++j;
        } else {
          t.value = static_cast<int64_t>(u);
        }
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '"' || c == '\'') {
      char quote = c;
      bool triple = src.substr(i, 3) == std::string(3, quote);
      size_t j = i + (triple ? 3 : 1);
      std::string text;
      bool closed = false;
      while (j < src.size()) {
        if (triple ? src.substr(j, 3) == std::string(3, quote) : src[j] == quote) {
          j += triple ? 3 : 1;
          closed = true;
          break;
        }
        if (src[j] == '\n' && !triple) break;
        if (src[j] != '\\') {
          text.push_back(src[j++]);
          continue;
        }
        if (j + 1 >= src.size()) break;
        char e = src[j + 1];
        j += 2;
        switch (e) {
          case 'n':
            text.push_back('\n');
            break;
          case 't':
            text.push_back('\t');
            break;
          case 'r':
            text.push_back('\r');
            break;
          case 'a':
            text.push_back('\a');
            break;
          case 'b':
            text.push_back('\b');
            break;
          case 'f':
            text.push_back('\f');
            break;
          case 'v':
            text.push_back('\v');
            break;
          case '\\':
          case '\'':
          case '"':
          case '`':
          case '?':
            text.push_back(e);
            break;
          case 'x':
          case 'X':
          case 'u':
          case 'U': {
            size_t n = (e == 'x' || e == 'X') ? 2 : e == 'u' ? 4 : 8;
            if (j + n > src.size()) return SyntaxError(t.column, "invalid escape sequence");
            uint32_t cp = 0;
            for (size_t k = 0; k < n; ++k) {
              int h = HexDigit(src[j + k]);
              if (h < 0) return SyntaxError(t.column, "invalid escape sequence");
              cp = cp * 16 + static_cast<uint32_t>(h);
            }
            j += n;
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
              return SyntaxError(t.column, "invalid unicode code point");
            }
            AppendUtf8(text, cp);
            break;
          }
          default:
            if (e >= '0' && e <= '3' && j + 1 < src.size()) {
              uint32_t cp = static_cast<uint32_t>(e - '0');
              for (int k = 0; k < 2; ++k) {
                char o = src[j + k];
                if (o < '0' || o > '7') return SyntaxError(t.column, "invalid escape sequence");
                cp = cp * 8 + static_cast<uint32_t>(o - '0');
              }
              j += 2;
              AppendUtf8(text, cp);
              break;
            }
            return SyntaxError(t.column, "invalid escape sequence");
        }
      }
      if (!closed) return SyntaxError(t.column, "unterminated string");
      t.kind = Tok::kString;
      t.text = std::move(text);
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    static const char* kPuncts[] = {"==", "!=", "<=", ">=", "&&", "||", "<", ">",
                                    "!",  "+",  "-",  "*",  "/",  "%",  "?", ":",
                                    ".",  ",",  "(",  ")",  "[",  "]",  "{", "}"};
    bool matched = false;
    for (const char* p : kPuncts) {
      absl::string_view pv(p);
      if (src.substr(i, pv.size()) == pv) {
        t.kind = Tok::kPunct;
        t.text = std::string(pv);
        out.push_back(std::move(t));
        i += pv.size();
        matched = true;
        break;
      }
    }
    if (!matched) {
      return SyntaxError(t.column,
                         absl::StrCat("token recognition error at: '", src.substr(i, 1), "'"));
    }
  }
  Token end;
  end.column = static_cast<int>(src.size()) + 1;
  out.push_back(end);
  return out;
}

const std::set<std::string>& Macros() {
  static const auto* kMacros = new std::set<std::string>{"all", "exists", "exists_one"};
  return *kMacros;
}

const std::set<std::string>& ReceiverFunctions() {
  static const auto* kFunctions =
      new std::set<std::string>{"size", "startsWith", "endsWith", "contains", "matches"};
  return *kFunctions;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<std::unique_ptr<Node>> ParseAll() {
    auto root = Expr();
    if (!root.ok()) return root.status();
    if (auto s = CheckSize(); !s.ok()) return s;
    if (Peek().kind != Tok::kEnd) {
      return SyntaxError(Peek().column, absl::StrCat("extraneous input '", Peek().text, "'"));
    }
    return root;
  }

 private:
  const Token& Peek() const { return tokens_[pos_]; }
  // Checked in every loop that grows the tree, so an oversized rule is refused while its
  // partial tree is still small enough to free recursively.
  absl::Status CheckSize() const {
    if (nodes_ <= kMaxNodes) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("ERROR: <input>:1:1: expression has more than ", kMaxNodes, " terms"));
  }
  bool IsPunct(absl::string_view p) const { return Peek().kind == Tok::kPunct && Peek().text == p; }
  bool Accept(absl::string_view p) {
    if (!IsPunct(p)) return false;
    ++pos_;
    return true;
  }
  absl::Status Expect(absl::string_view p) {
    if (Accept(p)) return absl::OkStatus();
    return SyntaxError(Peek().column,
                       absl::StrCat("missing '", p, "' at '",
                                    Peek().kind == Tok::kEnd ? "<EOF>" : Peek().text, "'"));
  }

  std::unique_ptr<Node> Make(NodeKind kind, std::string name,
                             std::vector<std::unique_ptr<Node>> args) {
    ++nodes_;
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->name = std::move(name);
    n->args = std::move(args);
    return n;
  }
  static std::vector<std::unique_ptr<Node>> Args(std::unique_ptr<Node> a,
                                                 std::unique_ptr<Node> b = nullptr,
                                                 std::unique_ptr<Node> c = nullptr) {
    std::vector<std::unique_ptr<Node>> out;
    for (auto* p : {&a, &b, &c}) {
      if (*p) out.push_back(std::move(*p));
    }
    return out;
  }

  absl::StatusOr<std::unique_ptr<Node>> Expr() {
    if (++depth_ > kMaxNesting) return SyntaxError(Peek().column, "expression nests too deeply");
    auto cond = Or();
    if (!cond.ok()) return cond;
    if (Accept("?")) {
      auto yes = Or();
      if (!yes.ok()) return yes;
      if (auto s = Expect(":"); !s.ok()) return s;
      auto no = Expr();
      if (!no.ok()) return no;
      cond =
          Make(NodeKind::kTernary, "?:", Args(std::move(*cond), std::move(*yes), std::move(*no)));
    }
    --depth_;
    return cond;
  }

  using Level = absl::StatusOr<std::unique_ptr<Node>> (Parser::*)();
  absl::StatusOr<std::unique_ptr<Node>> Binary(Level next, std::initializer_list<const char*> ops) {
    auto left = (this->*next)();
    if (!left.ok()) return left;
    while (true) {
      if (auto s = CheckSize(); !s.ok()) return s;
      std::string op;
      for (const char* o : ops) {
        if (std::string(o) == "in" ? (Peek().kind == Tok::kIdent && Peek().text == "in")
                                   : IsPunct(o)) {
          op = o;
          break;
        }
      }
      if (op.empty()) return left;
      ++pos_;
      auto right = (this->*next)();
      if (!right.ok()) return right;
      left = Make(NodeKind::kBinary, op, Args(std::move(*left), std::move(*right)));
    }
  }
  absl::StatusOr<std::unique_ptr<Node>> Or() { return Binary(&Parser::And, {"||"}); }
  absl::StatusOr<std::unique_ptr<Node>> And() { return Binary(&Parser::Relation, {"&&"}); }
  absl::StatusOr<std::unique_ptr<Node>> Relation() {
    return Binary(&Parser::Addition, {"==", "!=", "<=", ">=", "<", ">", "in"});
  }
  absl::StatusOr<std::unique_ptr<Node>> Addition() {
    return Binary(&Parser::Multiplication, {"+", "-"});
  }
  absl::StatusOr<std::unique_ptr<Node>> Multiplication() {
    return Binary(&Parser::Unary, {"*", "/", "%"});
  }

  absl::StatusOr<std::unique_ptr<Node>> Unary() {
    if (IsPunct("!") || IsPunct("-")) {
      std::string op = Peek().text;
      ++pos_;
      if (++depth_ > kMaxNesting) return SyntaxError(Peek().column, "expression nests too deeply");
      auto operand = Unary();
      --depth_;
      if (!operand.ok()) return operand;
      return Make(NodeKind::kUnary, op, Args(std::move(*operand)));
    }
    return Member();
  }

  absl::StatusOr<std::vector<std::unique_ptr<Node>>> CallArgs(absl::string_view close) {
    std::vector<std::unique_ptr<Node>> args;
    if (Accept(close)) return args;
    while (true) {
      if (auto s = CheckSize(); !s.ok()) return s;
      auto arg = Expr();
      if (!arg.ok()) return arg.status();
      args.push_back(std::move(*arg));
      if (Accept(close)) return args;
      if (auto s = Expect(","); !s.ok()) return s;
    }
  }

  absl::StatusOr<std::unique_ptr<Node>> Member() {
    auto node = Primary();
    if (!node.ok()) return node;
    while (true) {
      if (auto s = CheckSize(); !s.ok()) return s;
      if (Accept(".")) {
        if (Peek().kind != Tok::kIdent) {
          return SyntaxError(Peek().column, "expected a field or method name after '.'");
        }
        std::string field = Peek().text;
        ++pos_;
        if (Accept("(")) {
          auto args = CallArgs(")");
          if (!args.ok()) return args.status();
          std::vector<std::unique_ptr<Node>> all;
          all.push_back(std::move(*node));
          for (auto& a : *args) all.push_back(std::move(a));
          auto call = Make(NodeKind::kCall, field, std::move(all));
          call->receiver = true;
          node = std::move(call);
        } else {
          node = Make(NodeKind::kSelect, field, Args(std::move(*node)));
        }
      } else if (Accept("[")) {
        auto index = Expr();
        if (!index.ok()) return index;
        if (auto s = Expect("]"); !s.ok()) return s;
        node = Make(NodeKind::kIndex, "[]", Args(std::move(*node), std::move(*index)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<std::unique_ptr<Node>> Primary() {
    const Token& t = Peek();
    switch (t.kind) {
      case Tok::kInt:
      case Tok::kUint:
      case Tok::kDouble: {
        auto n = Make(NodeKind::kLiteral, "", {});
        n->literal = t.value;
        ++pos_;
        return n;
      }
      case Tok::kString: {
        auto n = Make(NodeKind::kLiteral, "", {});
        n->literal = t.text;
        ++pos_;
        return n;
      }
      case Tok::kIdent: {
        std::string name = t.text;
        int column = t.column;
        ++pos_;
        if (name == "true" || name == "false" || name == "null") {
          auto n = Make(NodeKind::kLiteral, "", {});
          n->literal = name == "null" ? Json(nullptr) : Json(name == "true");
          return n;
        }
        if (!Accept("(")) return Make(NodeKind::kIdent, name, {});
        auto args = CallArgs(")");
        if (!args.ok()) return args.status();
        if (name == "has") {
          if (args->size() != 1 || (*args)[0]->kind != NodeKind::kSelect) {
            return SyntaxError(column, "invalid argument to has() macro");
          }
          auto select = std::move((*args)[0]);
          select->kind = NodeKind::kHas;
          return select;
        }
        return Make(NodeKind::kCall, name, std::move(*args));
      }
      case Tok::kPunct:
        if (Accept("(")) {
          auto inner = Expr();
          if (!inner.ok()) return inner;
          if (auto s = Expect(")"); !s.ok()) return s;
          return inner;
        }
        if (Accept("[")) {
          auto items = CallArgs("]");
          if (!items.ok()) return items.status();
          return Make(NodeKind::kList, "[]", std::move(*items));
        }
        if (IsPunct("{")) {
          return absl::InvalidArgumentError(
              absl::StrCat("ERROR: <input>:1:", t.column,
                           ": map literals are not supported by kube-sim's CEL subset"));
        }
        return SyntaxError(t.column, absl::StrCat("mismatched input '", t.text, "'"));
      case Tok::kEnd:
        return SyntaxError(t.column, "mismatched input '<EOF>'");
    }
    return SyntaxError(t.column, "unexpected input");
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int nodes_ = 0;
};

// Declarations: every identifier must be self, oldSelf or a macro variable in scope; every call
// a function of the subset with the right arity.
absl::Status Check(const Node& n, std::vector<std::string>& scope, bool& uses_old_self) {
  switch (n.kind) {
    case NodeKind::kIdent: {
      if (n.name == "oldSelf") uses_old_self = true;
      if (n.name == "self" || n.name == "oldSelf") return absl::OkStatus();
      for (const auto& v : scope) {
        if (v == n.name) return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "ERROR: <input>:1:1: undeclared reference to '", n.name, "' (in container '')"));
    }
    case NodeKind::kCall: {
      if (n.receiver && Macros().count(n.name)) {
        if (n.args.size() != 3 || n.args[1]->kind != NodeKind::kIdent) {
          return absl::InvalidArgumentError(
              absl::StrCat("ERROR: <input>:1:1: invalid arguments to ", n.name, "() macro"));
        }
        if (auto s = Check(*n.args[0], scope, uses_old_self); !s.ok()) return s;
        scope.push_back(n.args[1]->name);
        absl::Status s = Check(*n.args[2], scope, uses_old_self);
        scope.pop_back();
        return s;
      }
      bool known = n.receiver ? ReceiverFunctions().count(n.name) > 0 : n.name == "size";
      size_t want = n.receiver ? (n.name == "size" ? 1 : 2) : 1;
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ERROR: <input>:1:1: undeclared reference to '", n.name,
            "' (in container ''); kube-sim's CEL subset has size, has, startsWith, endsWith, "
            "contains, matches, all, exists and exists_one"));
      }
      if (n.args.size() != want) {
        return absl::InvalidArgumentError(
            absl::StrCat("ERROR: <input>:1:1: found no matching overload for '", n.name, "'"));
      }
      break;
    }
    default:
      break;
  }
  for (const auto& a : n.args) {
    if (auto s = Check(*a, scope, uses_old_self); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Evaluation

absl::Status NoOverload() { return absl::InvalidArgumentError("no such overload"); }

bool IsInt(const Json& v) { return v.is_number_integer(); }
bool IsNumber(const Json& v) { return v.is_number(); }

std::string TypeName(const Json& v) {
  if (v.is_null()) return "null_type";
  if (v.is_boolean()) return "bool";
  if (v.is_number_integer()) return "int";
  if (v.is_number_float()) return "double";
  if (v.is_string()) return "string";
  if (v.is_array()) return "list";
  return "map";
}

class Evaluator {
 public:
  Evaluator(const Json& self, const Json* old_self) {
    vars_.emplace_back("self", &self);
    if (old_self) vars_.emplace_back("oldSelf", old_self);
  }

  absl::StatusOr<Json> Eval(const Node& n) {
    switch (n.kind) {
      case NodeKind::kLiteral:
        return n.literal;
      case NodeKind::kIdent:
        for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) {
          if (it->first == n.name) return *it->second;
        }
        return absl::InvalidArgumentError(absl::StrCat("no such attribute: ", n.name));
      case NodeKind::kSelect:
      case NodeKind::kHas: {
        auto operand = Eval(*n.args[0]);
        if (!operand.ok()) return operand;
        if (!operand->is_object()) {
          return absl::InvalidArgumentError(
              absl::StrCat("type '", TypeName(*operand), "' does not support field selection"));
        }
        auto it = operand->find(n.name);
        if (n.kind == NodeKind::kHas) return Json(it != operand->end());
        if (it == operand->end()) return absl::InvalidArgumentError("no such key: " + n.name);
        return *it;
      }
      case NodeKind::kIndex: {
        auto container = Eval(*n.args[0]);
        if (!container.ok()) return container;
        auto index = Eval(*n.args[1]);
        if (!index.ok()) return index;
        if (container->is_array()) {
          if (!IsInt(*index)) return NoOverload();
          int64_t i = index->get<int64_t>();
          if (i < 0 || i >= static_cast<int64_t>(container->size())) {
            return absl::InvalidArgumentError(absl::StrCat("index out of bounds: ", i));
          }
          return (*container)[static_cast<size_t>(i)];
        }
        if (container->is_object()) {
          if (!index->is_string()) return NoOverload();
          auto it = container->find(index->get<std::string>());
          if (it == container->end()) {
            return absl::InvalidArgumentError("no such key: " + index->get<std::string>());
          }
          return *it;
        }
        return NoOverload();
      }
      case NodeKind::kList: {
        Json out = Json::array();
        for (const auto& a : n.args) {
          auto v = Eval(*a);
          if (!v.ok()) return v;
          out.push_back(std::move(*v));
        }
        return out;
      }
      case NodeKind::kUnary: {
        auto v = Eval(*n.args[0]);
        if (!v.ok()) return v;
        if (n.name == "!") {
          if (!v->is_boolean()) return NoOverload();
          return Json(!v->get<bool>());
        }
        if (IsInt(*v)) {
          int64_t i = v->get<int64_t>();
          if (i == std::numeric_limits<int64_t>::min()) {
            return absl::InvalidArgumentError("integer overflow");
          }
          return Json(-i);
        }
        if (v->is_number_float()) return Json(-v->get<double>());
        return NoOverload();
      }
      case NodeKind::kTernary: {
        auto cond = Eval(*n.args[0]);
        if (!cond.ok()) return cond;
        if (!cond->is_boolean()) return NoOverload();
        return Eval(*n.args[cond->get<bool>() ? 1 : 2]);
      }
      case NodeKind::kBinary:
        return Binary(n);
      case NodeKind::kCall:
        return Call(n);
    }
    return NoOverload();
  }

 private:
  absl::StatusOr<Json> Logical(const Node& n, bool is_and) {
    auto left = Eval(*n.args[0]);
    // CEL's && and || are commutative over errors: a decisive operand wins either way.
    const bool decisive = !is_and;
    if (left.ok() && left->is_boolean() && left->get<bool>() == decisive) return Json(decisive);
    auto right = Eval(*n.args[1]);
    if (right.ok() && right->is_boolean() && right->get<bool>() == decisive) return Json(decisive);
    if (!left.ok()) return left;
    if (!right.ok()) return right;
    if (!left->is_boolean() || !right->is_boolean()) return NoOverload();
    return Json(!decisive);
  }

  static absl::StatusOr<int> Compare(const Json& a, const Json& b) {
    if (IsNumber(a) && IsNumber(b)) {
      if (IsInt(a) && IsInt(b)) {
        int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
        return x < y ? -1 : x > y ? 1 : 0;
      }
      double x = a.get<double>(), y = b.get<double>();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
      int c = a.get<std::string>().compare(b.get<std::string>());
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.is_boolean() && b.is_boolean()) return static_cast<int>(a.get<bool>()) - b.get<bool>();
    return NoOverload();
  }

  absl::StatusOr<Json> Arithmetic(const std::string& op, const Json& a, const Json& b) {
    if (op == "+" && a.is_string() && b.is_string()) {
      return Json(a.get<std::string>() + b.get<std::string>());
    }
    if (op == "+" && a.is_array() && b.is_array()) {
      Json out = a;
      for (const auto& v : b) out.push_back(v);
      return out;
    }
    if (IsInt(a) && IsInt(b)) {
      int64_t x = a.get<int64_t>(), y = b.get<int64_t>(), r = 0;
      bool overflow = false;
      if (op == "+") {
        overflow = __builtin_add_overflow(x, y, &r);
      } else if (op == "-") {
        overflow = __builtin_sub_overflow(x, y, &r);
      } else if (op == "*") {
        overflow = __builtin_mul_overflow(x, y, &r);
      } else if (op == "/" || op == "%") {
        if (y == 0) {
          return absl::InvalidArgumentError(op == "/" ? "division by zero" : "modulus by zero");
        }
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          overflow = true;
        } else {
          r = op == "/" ? x / y : x % y;
        }
      }
      if (overflow) return absl::InvalidArgumentError("integer overflow");
      return Json(r);
    }
    if (IsNumber(a) && IsNumber(b) && op != "%") {
      double x = a.get<double>(), y = b.get<double>();
      if (op == "+") return Json(x + y);
      if (op == "-") return Json(x - y);
      if (op == "*") return Json(x * y);
      return Json(x / y);
    }
    return NoOverload();
  }

  absl::StatusOr<Json> Binary(const Node& n) {
    const std::string& op = n.name;
    if (op == "&&" || op == "||") return Logical(n, op == "&&");
    auto a = Eval(*n.args[0]);
    if (!a.ok()) return a;
    auto b = Eval(*n.args[1]);
    if (!b.ok()) return b;
    if (op == "==") return Json(*a == *b);
    if (op == "!=") return Json(*a != *b);
    if (op == "in") {
      if (b->is_array()) {
        for (const auto& v : *b) {
          if (v == *a) return Json(true);
        }
        return Json(false);
      }
      if (b->is_object()) {
        if (!a->is_string()) return NoOverload();
        return Json(b->contains(a->get<std::string>()));
      }
      return NoOverload();
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      auto c = Compare(*a, *b);
      if (!c.ok()) return c.status();
      if (op == "<") return Json(*c < 0);
      if (op == "<=") return Json(*c <= 0);
      if (op == ">") return Json(*c > 0);
      return Json(*c >= 0);
    }
    return Arithmetic(op, *a, *b);
  }

  absl::StatusOr<Json> Macro(const Node& n) {
    auto range = Eval(*n.args[0]);
    if (!range.ok()) return range;
    std::vector<Json> elements;
    if (range->is_array()) {
      for (const auto& v : *range) elements.push_back(v);
    } else if (range->is_object()) {
      for (const auto& [k, unused] : range->items()) elements.emplace_back(k);
    } else {
      return NoOverload();
    }
    int trues = 0;
    bool any_false = false;
    std::optional<absl::Status> error;
    for (const Json& element : elements) {
      vars_.emplace_back(n.args[1]->name, &element);
      auto v = Eval(*n.args[2]);
      vars_.pop_back();
      if (!v.ok()) {
        if (!error) error = v.status();
        continue;
      }
      if (!v->is_boolean()) {
        if (!error) error = NoOverload();
        continue;
      }
      if (v->get<bool>()) {
        ++trues;
      } else {
        any_false = true;
      }
    }
    if (n.name == "all") {
      if (any_false) return Json(false);
      if (error) return *error;
      return Json(true);
    }
    if (n.name == "exists") {
      if (trues > 0) return Json(true);
      if (error) return *error;
      return Json(false);
    }
    if (error) return *error;
    return Json(trues == 1);
  }

  absl::StatusOr<Json> Call(const Node& n) {
    if (n.receiver && Macros().count(n.name)) return Macro(n);
    std::vector<Json> args;
    for (const auto& a : n.args) {
      auto v = Eval(*a);
      if (!v.ok()) return v;
      args.push_back(std::move(*v));
    }
    if (n.name == "size") {
      const Json& v = args[0];
      if (v.is_string()) return Json(CodePointCount(v.get<std::string>()));
      if (v.is_array() || v.is_object()) return Json(static_cast<int64_t>(v.size()));
      return NoOverload();
    }
    if (!args[0].is_string() || !args[1].is_string()) return NoOverload();
    const std::string& s = args[0].get_ref<const std::string&>();
    const std::string& arg = args[1].get_ref<const std::string&>();
    if (n.name == "startsWith") return Json(s.rfind(arg, 0) == 0);
    if (n.name == "endsWith") {
      return Json(s.size() >= arg.size() && s.compare(s.size() - arg.size(), arg.size(), arg) == 0);
    }
    if (n.name == "contains") return Json(s.find(arg) != std::string::npos);
    RE2 re(arg, RE2::Quiet);
    if (!re.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("error parsing regexp: ", re.error()));
    }
    return Json(RE2::PartialMatch(s, re));
  }

  std::vector<std::pair<std::string, const Json*>> vars_;
};

}  // namespace

int64_t CodePointCount(absl::string_view text) {
  int64_t n = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

Program::~Program() = default;

absl::StatusOr<std::shared_ptr<const Program>> Program::Compile(absl::string_view source) {
  auto tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  Parser parser(std::move(*tokens));
  auto root = parser.ParseAll();
  if (!root.ok()) return root.status();
  std::shared_ptr<Program> program(new Program());
  std::vector<std::string> scope;
  if (auto s = Check(**root, scope, program->uses_old_self_); !s.ok()) return s;
  program->root_ = std::move(*root);
  return std::shared_ptr<const Program>(std::move(program));
}

absl::StatusOr<Json> Program::Evaluate(const Json& self, const Json* old_self) const {
  Evaluator evaluator(self, old_self);
  return evaluator.Eval(*root_);
}

}  // namespace reverser::kubesim::cel
