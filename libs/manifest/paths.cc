#include "libs/manifest/paths.h"

#include <openssl/sha.h>

#include <algorithm>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "libs/core/status.h"

namespace reverser::manifest {
namespace {

constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxSegmentBytes = 255;

bool HasControl(absl::string_view s) {
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) return true;
  }
  return false;
}

// One path segment taken from an object's identity (other than its name).
absl::Status ValidateSegment(absl::string_view what, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " must not be empty"));
  if (value == "." || value == "..") {
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", value, "\" is not a file name"));
  }
  if (value.find('/') != absl::string_view::npos || value.find('\\') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", value, "\" must not contain a path separator"));
  }
  if (HasControl(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must not contain NUL or control characters"));
  }
  if (value.size() > kMaxSegmentBytes - std::string_view(kSensitiveSuffix).size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is too long for a file name"));
  }
  return absl::OkStatus();
}

void AppendEscape(std::string* out, unsigned char byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out->push_back('%');
  out->push_back(kHex[byte >> 4]);
  out->push_back(kHex[byte & 0xF]);
}

bool IsEscapedByte(unsigned char byte) {
  return byte == '%' || byte == '/' || byte == '\\' || byte < 0x20 || byte == 0x7F;
}

// A template variable's value as one segment: `%`, `/`, `\` and control bytes percent-encoded,
// so a value can never split into directories or fold two objects onto one path.
std::string EncodeSegment(absl::string_view value) {
  std::string out;
  for (char c : value) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (IsEscapedByte(byte)) {
      AppendEscape(&out, byte);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The longest prefix of `text` of at most `max_bytes` that ends neither inside a UTF-8
// sequence nor inside a `%XX` escape.
absl::string_view SafePrefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  if (cut >= 1 && text[cut - 1] == '%') {
    cut -= 1;
  } else if (cut >= 2 && text[cut - 2] == '%') {
    cut -= 2;
  }
  return text.substr(0, cut);
}

std::string Sha256Hex16(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xF]);
  }
  return out;
}

// `stem` + `extension` as one segment of at most 255 bytes (see FileStem in paths.h).
std::string FitSegment(absl::string_view stem, absl::string_view extension) {
  if (stem.size() + extension.size() <= kMaxSegmentBytes) {
    return absl::StrCat(stem, extension);
  }
  const size_t budget =
      kMaxSegmentBytes - extension.size() - std::string_view(kShortenedMarker).size() - 16;
  return absl::StrCat(SafePrefix(stem, budget), kShortenedMarker, Sha256Hex16(stem), extension);
}

std::string CollapseEmptySegments(absl::string_view path) {
  std::vector<absl::string_view> kept;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (!part.empty()) kept.push_back(part);
  }
  return absl::StrJoin(kept, "/");
}

// Every segment of a rendered template over 255 bytes shortened (the file name keeps its
// extension).
std::string FitSegments(absl::string_view path, bool sensitive) {
  std::vector<std::string> segments = absl::StrSplit(path, '/');
  for (size_t i = 0; i < segments.size(); ++i) {
    std::string& segment = segments[i];
    if (segment.size() <= kMaxSegmentBytes) continue;
    absl::string_view extension;
    if (i + 1 == segments.size()) {
      for (absl::string_view candidate :
           {sensitive ? kSensitiveSuffix : kPlainSuffix, ".yaml", ".yml"}) {
        if (absl::EndsWith(segment, candidate)) {
          extension = candidate;
          break;
        }
      }
    }
    absl::string_view stem(segment);
    stem.remove_suffix(extension.size());
    segment = FitSegment(stem, extension);
  }
  return absl::StrJoin(segments, "/");
}

std::map<std::string, std::string> Variables(const ObjectIdentity& id) {
  const bool cluster = id.scope == core::Scope::kCluster;
  return {
      {"group", id.gvr.group},
      {"groupPath", id.gvr.group},
      {"version", id.gvr.version},
      {"apiVersion", id.gvr.ApiVersion()},
      {"resource", id.gvr.resource},
      {"kind", id.kind},
      {"scope", cluster ? "cluster" : "namespaced"},
      {"namespace", cluster ? "" : id.namespace_},
      {"namespaceOrCluster", cluster ? kClusterScopeSegment : id.namespace_},
      {"name", FileStem(id.name, id.sensitive)},
      {"sensitiveSuffix", id.sensitive ? kSensitiveSuffix : kPlainSuffix},
  };
}

bool IsKnownVariable(absl::string_view name) {
  static const ObjectIdentity kAny;
  static const std::map<std::string, std::string> kNames = Variables(kAny);
  return kNames.count(std::string(name)) > 0;
}

// Splits a template into literal text and `{variable}` placeholders; reports stray braces.
struct Piece {
  bool variable;
  std::string text;
};
absl::StatusOr<std::vector<Piece>> Tokenize(absl::string_view tmpl) {
  std::vector<Piece> pieces;
  std::string literal;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '}') {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement template \"", tmpl, "\" has a \"}\" that closes no variable"));
    }
    if (tmpl[i] != '{') {
      literal.push_back(tmpl[i]);
      continue;
    }
    const size_t close = tmpl.find_first_of("{}", i + 1);
    if (close == absl::string_view::npos || tmpl[close] != '}') {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement template \"", tmpl, "\" has a \"{\" that opens no complete variable"));
    }
    if (!literal.empty()) pieces.push_back({false, std::move(literal)});
    literal.clear();
    pieces.push_back({true, std::string(tmpl.substr(i + 1, close - i - 1))});
    i = close;
  }
  if (!literal.empty()) pieces.push_back({false, std::move(literal)});
  return pieces;
}

absl::Status CheckVariables(absl::string_view tmpl, const std::vector<Piece>& pieces) {
  std::vector<std::string> unknown;
  for (const Piece& piece : pieces) {
    if (piece.variable && !IsKnownVariable(piece.text)) unknown.push_back("{" + piece.text + "}");
  }
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("placement template \"", tmpl,
                                                 "\" references unknown variable(s): ",
                                                 absl::StrJoin(unknown, ", ")));
}

}  // namespace

absl::Status ValidateRelativePath(absl::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("path is empty");
  if (path.size() > kMaxPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat("path is longer than ", kMaxPathBytes, " bytes"));
  }
  if (HasControl(path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("path \"", absl::CHexEscape(path), "\" contains NUL or control characters"));
  }
  if (path.find('\\') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("path \"", path, "\" must use \"/\" separators, not \"\\\""));
  }
  if (path.front() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("path \"", path, "\" must be relative"));
  }
  std::vector<absl::string_view> segments = absl::StrSplit(path, '/');
  for (absl::string_view segment : segments) {
    if (segment.empty() || segment == "." || segment == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "path \"", path, "\" must be a clean relative path that stays under spec.path"));
    }
    if (segment.size() > kMaxSegmentBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("path \"", path, "\" has a segment longer than ", kMaxSegmentBytes));
    }
  }
  const absl::string_view file = segments.back();
  if (!absl::EndsWith(file, ".yaml") && !absl::EndsWith(file, ".yml")) {
    return absl::InvalidArgumentError(absl::StrCat("path \"", path, "\" must end in .yaml or .yml"));
  }
  if (file == ".yaml" || file == ".yml" || file == ".sops.yaml") {
    return absl::InvalidArgumentError(absl::StrCat("path \"", path, "\" has no file name"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NormalizeTargetPath(absl::string_view target_path) {
  absl::string_view path = target_path;
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty() || path == ".") {
    if (!target_path.empty() && target_path.front() == '/') {
      return absl::InvalidArgumentError("spec.path must be relative, not \"/\"");
    }
    return std::string();
  }
  if (HasControl(path) || path.find('\\') != absl::string_view::npos || path.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.path \"", absl::CHexEscape(target_path),
                     "\" must be a relative \"/\"-separated path without control characters"));
  }
  for (absl::string_view segment : absl::StrSplit(path, '/')) {
    if (segment.empty() || segment == "." || segment == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.path \"", target_path, "\" must be a clean relative path (no \"..\", \".\" or \"//\")"));
    }
  }
  return std::string(path);
}

absl::StatusOr<std::string> JoinTargetPath(absl::string_view target_path,
                                           absl::string_view relative) {
  ASSIGN_OR_RETURN(std::string base, NormalizeTargetPath(target_path));
  RETURN_IF_ERROR(ValidateRelativePath(relative));
  std::string joined = base.empty() ? std::string(relative) : absl::StrCat(base, "/", relative);
  if (joined.size() > kMaxPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat("path is longer than ", kMaxPathBytes, " bytes"));
  }
  return joined;
}

std::string FileStem(absl::string_view name, bool sensitive) {
  std::string stem = EncodeSegment(name);
  if (!sensitive && absl::EndsWith(stem, ".sops")) {
    // "x.sops.yaml" would read as encrypted (and match .sops.yaml's creation rule).
    stem = absl::StrCat(stem.substr(0, stem.size() - 5), "%2Esops");
  } else if (!sensitive && stem == "kustomization") {
    stem = "%6Bustomization";  // kustomization.yaml is kustomize's entry point
  }
  return stem;
}

std::string FileName(absl::string_view name, bool sensitive) {
  return FitSegment(FileStem(name, sensitive), sensitive ? kSensitiveSuffix : kPlainSuffix);
}

absl::Status ValidateIdentity(const ObjectIdentity& id) {
  if (id.name.empty()) return absl::InvalidArgumentError("name must not be empty");
  if (id.name == "." || id.name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("name \"", id.name, "\" is not a file name"));
  }
  if (id.scope == core::Scope::kCluster) {
    if (!id.namespace_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster-scoped object \"", id.name, "\" must not have a namespace (got \"",
          id.namespace_, "\")"));
    }
  } else {
    RETURN_IF_ERROR(core::ValidateNamespaceName(id.namespace_));
  }
  if (!id.gvr.group.empty()) RETURN_IF_ERROR(ValidateSegment("group", id.gvr.group));
  RETURN_IF_ERROR(ValidateSegment("version", id.gvr.version));
  RETURN_IF_ERROR(ValidateSegment("resource", id.gvr.resource));
  return absl::OkStatus();
}

absl::StatusOr<ObjectIdentity> IdentityOf(const nlohmann::json& object,
                                          const core::GroupVersionResource& gvr, core::Scope scope,
                                          bool sensitive) {
  if (!object.is_object()) return absl::InvalidArgumentError("object must be a map");
  const auto string_at = [](const nlohmann::json& map, const char* key) -> std::string {
    const auto it = map.find(key);
    return it != map.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const nlohmann::json metadata = object.value("metadata", nlohmann::json::object());
  if (!metadata.is_object()) return absl::InvalidArgumentError("metadata must be a map");
  ObjectIdentity id{gvr, string_at(object, "kind"), scope, string_at(metadata, "namespace"),
                    string_at(metadata, "name"), sensitive};
  RETURN_IF_ERROR(ValidateIdentity(id));
  return id;
}

absl::StatusOr<std::string> CanonicalPath(absl::string_view target_path, const ObjectIdentity& id) {
  RETURN_IF_ERROR(ValidateIdentity(id));
  std::vector<absl::string_view> parts;
  parts.push_back(id.scope == core::Scope::kCluster ? absl::string_view(kClusterScopeSegment)
                                                    : absl::string_view(id.namespace_));
  if (!id.gvr.group.empty()) parts.push_back(id.gvr.group);
  parts.push_back(id.gvr.resource);
  const std::string file = FileName(id.name, id.sensitive);
  parts.push_back(file);
  return JoinTargetPath(target_path, absl::StrJoin(parts, "/"));
}

absl::StatusOr<std::string> RenderPlacementTemplate(absl::string_view tmpl,
                                                    const ObjectIdentity& id) {
  ASSIGN_OR_RETURN(std::vector<Piece> pieces, Tokenize(tmpl));
  RETURN_IF_ERROR(CheckVariables(tmpl, pieces));
  RETURN_IF_ERROR(ValidateIdentity(id));
  const std::map<std::string, std::string> vars = Variables(id);
  // Collapsing empty segments drops at most the template's own slashes: a longer rendering can
  // only be refused, so a template repeating {name} thousands of times stops early.
  const size_t max_rendered = kMaxPathBytes + std::count(tmpl.begin(), tmpl.end(), '/');
  std::string rendered;
  for (const Piece& piece : pieces) {
    // sensitiveSuffix is a file-name suffix, never a segment of its own, and name is already a
    // FileStem; everything else is an identity value and is encoded so it stays inside one
    // segment.
    const bool verbatim = piece.text == "sensitiveSuffix" || piece.text == "name";
    rendered += !piece.variable ? piece.text
                : verbatim      ? vars.at(piece.text)
                                : EncodeSegment(vars.at(piece.text));
    if (rendered.size() > max_rendered) {
      return absl::InvalidArgumentError(absl::StrCat("placement template renders more than ",
                                                     kMaxPathBytes, " bytes for ",
                                                     id.gvr.ToString(), " ", id.name));
    }
  }
  const std::string path = FitSegments(CollapseEmptySegments(rendered), id.sensitive);
  if (absl::Status status = ValidateRelativePath(path); !status.ok()) {
    return core::Annotate(status, absl::StrCat("placement template \"", tmpl, "\" for ",
                                               id.gvr.ToString(), " ", id.name));
  }
  return path;
}

absl::Status ValidatePlacementTemplate(absl::string_view tmpl) {
  if (tmpl.empty()) return absl::InvalidArgumentError("placement template is empty");
  ASSIGN_OR_RETURN(std::vector<Piece> pieces, Tokenize(tmpl));
  RETURN_IF_ERROR(CheckVariables(tmpl, pieces));
  if (HasControl(tmpl)) {
    return absl::InvalidArgumentError("placement template contains control characters");
  }
  if (tmpl.find('\\') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement template \"", tmpl, "\" must use \"/\" separators, not \"\\\""));
  }
  if (tmpl.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("placement template \"", tmpl, "\" must be relative, not absolute"));
  }
  for (absl::string_view segment : absl::StrSplit(tmpl, '/')) {
    if (segment == ".." || segment == ".") {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement template \"", tmpl, "\" must not contain a \"", segment, "\" segment"));
    }
  }
  if (!absl::EndsWith(tmpl, "{sensitiveSuffix}") && !absl::EndsWith(tmpl, ".yaml") &&
      !absl::EndsWith(tmpl, ".yml")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement template \"", tmpl, "\" must end in .yaml, .yml or {sensitiveSuffix}"));
  }
  return absl::OkStatus();
}

bool IsIdentityComplete(absl::string_view tmpl, bool narrowed_to_one_type) {
  const bool has_name = absl::StrContains(tmpl, "{name}");
  const bool has_namespace =
      absl::StrContains(tmpl, "{namespace}") || absl::StrContains(tmpl, "{namespaceOrCluster}");
  if (!has_name || !has_namespace) return false;
  if (narrowed_to_one_type) return true;
  return (absl::StrContains(tmpl, "{groupPath}") || absl::StrContains(tmpl, "{group}")) &&
         absl::StrContains(tmpl, "{resource}");
}

std::string PlacementTypeKey(const core::GroupVersionResource& gvr) {
  return gvr.group.empty() ? absl::StrCat(gvr.version, "/", gvr.resource)
                           : absl::StrCat(gvr.group, "/", gvr.version, "/", gvr.resource);
}

}  // namespace reverser::manifest
