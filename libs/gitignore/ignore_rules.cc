#include "libs/gitignore/ignore_rules.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reverser::gitignore {
namespace {

using internal::Token;

bool InClass(const Token& token, char c) {
  bool in = false;
  for (const auto& [low, high] : token.ranges) {
    if (c >= low && c <= high) in = true;
  }
  return in != token.negated;
}

// A `**` is special only as a whole segment; elsewhere it is two stars (gitignore(5)).
bool WholeSegmentAt(absl::string_view glob, size_t at) {
  return glob.substr(at, 2) == "**" && (at == 0 || glob[at - 1] == '/') &&
         (at + 2 == glob.size() || glob[at + 2] == '/');
}

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view glob) {
  std::vector<Token> tokens;
  for (size_t i = 0; i < glob.size();) {
    const char c = glob[i];
    Token token;
    if (c == '\\') {
      token.c = i + 1 < glob.size() ? glob[i + 1] : '\\';
      i += 2;
    } else if (WholeSegmentAt(glob, i)) {
      const bool more = i + 2 < glob.size();
      token.kind = more ? Token::Kind::kDirs : Token::Kind::kAll;
      i += more ? 3 : 2;
      // `a/**` keeps its `/` before the `All`: it matches inside `a`, not `a` itself.
    } else if (c == '*') {
      token.kind = Token::Kind::kStar;
      while (i < glob.size() && glob[i] == '*') ++i;
    } else if (c == '?') {
      token.kind = Token::Kind::kAny;
      ++i;
    } else if (c == '[') {
      token.kind = Token::Kind::kClass;
      size_t j = i + 1;
      if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) {
        token.negated = true;
        ++j;
      }
      bool first = true;
      bool closed = false;
      while (j < glob.size()) {
        char low = glob[j];
        if (low == ']' && !first) {
          closed = true;
          ++j;
          break;
        }
        if (low == '\\' && j + 1 < glob.size()) low = glob[++j];
        char high = low;
        if (j + 2 < glob.size() && glob[j + 1] == '-' && glob[j + 2] != ']') {
          high = glob[j + 2];
          if (high == '\\' && j + 3 < glob.size()) high = glob[++j + 2];
          j += 2;
        }
        if (low <= high) token.ranges.push_back({low, high});
        ++j;
        first = false;
      }
      if (!closed) return absl::InvalidArgumentError("an unterminated [ class");
      i = j;
    } else {
      token.c = c;
      ++i;
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// A set of NFA positions over the tokens: position k is "tokens [0, k) matched"; an extra bit
// per kDirs token is "inside a directory name of it".
class Matcher {
 public:
  explicit Matcher(const std::vector<Token>& tokens) : tokens_(tokens) {}

  bool Matches(absl::string_view text) const {
    const size_t m = tokens_.size();
    std::vector<char> at(m + 1, 0), inside(m + 1, 0), next_at(m + 1), next_inside(m + 1);
    at[0] = 1;
    Close(at);
    for (char c : text) {
      std::fill(next_at.begin(), next_at.end(), 0);
      std::fill(next_inside.begin(), next_inside.end(), 0);
      bool alive = false;
      for (size_t k = 0; k < m; ++k) {
        const Token& token = tokens_[k];
        if (inside[k]) {  // in a kDirs directory name
          if (c == '/') {
            next_at[k] = 1;  // that directory is done; more may follow, or the rest
          } else {
            next_inside[k] = 1;
          }
          alive = true;
        }
        if (!at[k]) continue;
        switch (token.kind) {
          case Token::Kind::kLiteral:
            if (c == token.c) next_at[k + 1] = 1;
            break;
          case Token::Kind::kAny:
            if (c != '/') next_at[k + 1] = 1;
            break;
          case Token::Kind::kClass:
            if (c != '/' && InClass(token, c)) next_at[k + 1] = 1;
            break;
          case Token::Kind::kStar:
            if (c != '/') next_at[k] = 1;
            break;
          case Token::Kind::kAll:
            next_at[k] = 1;
            break;
          case Token::Kind::kDirs:
            if (c != '/') next_inside[k] = 1;
            break;
        }
        alive = true;
      }
      if (!alive) return false;
      at.swap(next_at);
      inside.swap(next_inside);
      Close(at);
    }
    return at[m] != 0;
  }

 private:
  // Tokens that match the empty string let a position move on without a character.
  void Close(std::vector<char>& at) const {
    for (size_t k = 0; k < tokens_.size(); ++k) {
      const Token::Kind kind = tokens_[k].kind;
      if (at[k] &&
          (kind == Token::Kind::kStar || kind == Token::Kind::kDirs || kind == Token::Kind::kAll)) {
        at[k + 1] = 1;
      }
    }
  }

  const std::vector<Token>& tokens_;
};

// Drops trailing spaces unless the last is escaped (`\ `).
absl::string_view TrimTrailingSpaces(absl::string_view line) {
  while (!line.empty() && line.back() == ' ') {
    if (line.size() >= 2 && line[line.size() - 2] == '\\') break;
    line.remove_suffix(1);
  }
  return line;
}

// Paths a pattern must not hide all of: every manifest, or every directory.
constexpr absl::string_view kYamlProbes[] = {"a.yaml", "Zq-9.yaml", "d/e/_f.yaml"};
constexpr absl::string_view kYmlProbes[] = {"b.yml", "Zq-9.yml", "g/h/_0.yml"};
constexpr absl::string_view kDirProbes[] = {"d", "Zq-9", "_x0"};

}  // namespace

bool GlobMatches(absl::string_view glob, absl::string_view text) {
  auto tokens = Tokenize(glob);
  return tokens.ok() && Matcher(*tokens).Matches(text);
}

absl::StatusOr<IgnoreRules> IgnoreRules::Parse(absl::string_view text, IgnoreLimits limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(".gittargetignore is ", text.size(), " bytes; at most ", limits.max_bytes));
  }
  IgnoreRules rules;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    auto refuse = [number](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(".gittargetignore line ", number, ": ", why));
    };
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != absl::string_view::npos) return refuse("a NUL byte");
    line = TrimTrailingSpaces(line);
    if (line.empty() || line.front() == '#') continue;
    if (line.size() > limits.max_pattern_length) {
      return refuse(absl::StrCat("a pattern longer than ", limits.max_pattern_length));
    }
    if (rules.patterns_.size() == limits.max_patterns) {
      return refuse(absl::StrCat("more than ", limits.max_patterns, " patterns"));
    }
    Pattern pattern;
    pattern.line = number;
    if (line.front() == '!') {
      pattern.negated = true;
      line.remove_prefix(1);
    }
    if (!line.empty() && line.back() == '/' &&
        !(line.size() >= 2 && line[line.size() - 2] == '\\')) {
      pattern.dir_only = true;
      line.remove_suffix(1);
    }
    pattern.anchored = line.find('/') != absl::string_view::npos;
    if (!line.empty() && line.front() == '/') line.remove_prefix(1);
    auto tokens = Tokenize(line);
    if (!tokens.ok()) return refuse(tokens.status().message());
    pattern.glob = std::string(line);
    pattern.tokens = std::move(*tokens);
    if (!pattern.negated) {
      Matcher matcher(pattern.tokens);
      auto hides_all = [&](absl::Span<const absl::string_view> probes, bool dirs) {
        for (absl::string_view probe : probes) {
          if (pattern.dir_only && !dirs) return false;
          absl::string_view subject = probe;
          if (!pattern.anchored) subject = probe.substr(probe.rfind('/') + 1);
          if (!matcher.Matches(subject)) return false;
        }
        return true;
      };
      if (line.empty() || hides_all(kYamlProbes, false) || hides_all(kYmlProbes, false) ||
          hides_all(kDirProbes, true)) {
        return refuse(absl::StrCat("\"", std::string(line.empty() ? "/" : line),
                                   "\" would hide every file or every manifest under the path"));
      }
    }
    rules.patterns_.push_back(std::move(pattern));
  }
  return rules;
}

int IgnoreRules::Decide(absl::string_view path, absl::string_view name, bool is_dir) const {
  for (auto it = patterns_.rbegin(); it != patterns_.rend(); ++it) {
    if (it->dir_only && !is_dir) continue;
    if (Matcher(it->tokens).Matches(it->anchored ? path : name)) return it->negated ? -1 : 1;
  }
  return 0;
}

bool IgnoreRules::Ignored(absl::string_view path, bool is_dir) const {
  if (patterns_.empty() || path.empty()) return false;
  // A directory above it that is ignored hides it, whatever later patterns say.
  for (size_t slash = path.find('/'); slash != absl::string_view::npos;
       slash = path.find('/', slash + 1)) {
    absl::string_view dir = path.substr(0, slash);
    if (Decide(dir, dir.substr(dir.rfind('/') + 1), true) > 0) return true;
  }
  return Decide(path, path.substr(path.rfind('/') + 1), is_dir) > 0;
}

}  // namespace reverser::gitignore
