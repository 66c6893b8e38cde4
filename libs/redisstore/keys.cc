#include "libs/redisstore/keys.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "libs/core/status.h"

namespace reverser::redisstore {
namespace {

constexpr absl::string_view kGlobChars = "*?[]\\";

std::string AuthorAuditBase(const KeyPrefix& prefix, absl::string_view group_resource) {
  return absl::StrCat(prefix.reference(), ":author:v1:audit:", group_resource);
}

absl::StatusOr<std::string> ParseOwnPrefix(absl::string_view raw) {
  absl::string_view trimmed = raw;
  while (absl::ConsumeSuffix(&trimmed, ":")) {
  }
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis key prefix \"", raw, "\" is empty after trimming trailing ':'"));
  }
  for (char c : trimmed) {
    if (kGlobChars.find(c) != absl::string_view::npos || c == '%') {
      return absl::InvalidArgumentError(
          absl::StrCat("redis key prefix \"", raw, "\" contains '", std::string(1, c),
                       "': glob characters (*?[]\\) and '%' are not allowed"));
    }
    if (c == '{' || c == '}') {
      return absl::InvalidArgumentError(
          absl::StrCat("redis key prefix \"", raw,
                       "\" contains a brace: '{' and '}' would move the keys' Redis Cluster hash "
                       "tag into the prefix"));
    }
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat("redis key prefix \"", absl::CEscape(raw),
                                                     "\" contains whitespace or a control byte"));
    }
  }
  return std::string(trimmed);
}

}  // namespace

absl::StatusOr<KeyPrefix> KeyPrefix::Parse(absl::string_view raw) { return Parse(raw, ""); }

absl::StatusOr<KeyPrefix> KeyPrefix::Parse(absl::string_view raw, absl::string_view reference) {
  ASSIGN_OR_RETURN(std::string own, ParseOwnPrefix(raw));
  if (reference.empty()) return KeyPrefix(own, own);
  ASSIGN_OR_RETURN(std::string shared, ParseOwnPrefix(reference));
  // The reference's own rule for its prefix: a value it refuses names no reference keyspace.
  if (shared.size() > kMaxReferenceLength) {
    return absl::InvalidArgumentError(absl::StrCat("reference key prefix \"", reference,
                                                   "\" is longer than ", kMaxReferenceLength,
                                                   " characters"));
  }
  for (char c : shared) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' &&
        c != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("reference key prefix \"", reference, "\" contains '", std::string(1, c),
                       "': gitops-reverser allows only [A-Za-z0-9], '-', '_', '.' and ':'"));
    }
  }
  return KeyPrefix(std::move(own), std::move(shared));
}

std::string EscapeKeySegment(absl::string_view segment) {
  std::string out;
  out.reserve(segment.size());
  for (char c : segment) {
    if (c == '%') {
      out += "%25";
    } else if (c == ':') {
      out += "%3A";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapeGlob(absl::string_view literal) {
  std::string out;
  out.reserve(literal.size());
  for (char c : literal) {
    if (kGlobChars.find(c) != absl::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string GroupResourceSegment(absl::string_view group, absl::string_view resource) {
  return group.empty() ? std::string(resource) : absl::StrCat(group, "/", resource);
}

std::string ScopeSegment(const core::WatchScope& scope) {
  return scope.IsCluster() ? std::string("cluster")
                           : absl::StrCat("ns:", EscapeKeySegment(scope.namespace_));
}

MaterializationKeys MaterializationKeys::For(const KeyPrefix& prefix,
                                             const core::GroupVersionResource& gvr,
                                             const core::WatchScope& scope) {
  return ForIndexMember(prefix, absl::StrCat(GroupResourceSegment(gvr), ":", ScopeSegment(scope)));
}

MaterializationKeys MaterializationKeys::ForIndexMember(const KeyPrefix& prefix,
                                                        absl::string_view member) {
  MaterializationKeys keys;
  keys.index_member = std::string(member);
  // `{<GR>:<scope>}` is a Redis Cluster hash tag: every key of one materialization lands in one
  // slot, so its scripts and transactions need no key change to run on a cluster.
  keys.base = absl::StrCat(prefix.value(), ":mat:v1:{", keys.index_member, "}");
  keys.stream = absl::StrCat(keys.base, ":stream");
  keys.checkpoint_items = absl::StrCat(keys.base, ":ckpt:items");
  keys.checkpoint_rv = absl::StrCat(keys.base, ":ckpt:rv");
  keys.checkpoint_meta = absl::StrCat(keys.base, ":ckpt:meta");
  keys.state = absl::StrCat(keys.base, ":state");
  keys.counts = absl::StrCat(keys.base, ":counts");
  return keys;
}

std::string MaterializationKeys::CheckpointStaging(absl::string_view generation) const {
  return absl::StrCat(checkpoint_items, ":next:", EscapeKeySegment(generation));
}

std::string MaterializationIndexKey(const KeyPrefix& prefix) {
  return absl::StrCat(prefix.value(), ":mat:v1:index");
}

absl::StatusOr<IndexMember> ParseIndexMember(absl::string_view member) {
  size_t colon = member.find(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("materialization index member \"", member, "\" is not <GR>:<scope>"));
  }
  absl::string_view scope_text = member.substr(colon + 1);
  IndexMember parsed;
  parsed.group_resource = std::string(member.substr(0, colon));
  if (scope_text == "cluster") {
    parsed.scope = core::WatchScope::Cluster();
    return parsed;
  }
  // Namespaces are DNS labels (never escaped in practice); validate like the core parser.
  auto scope = core::WatchScope::ParseKeySegment(scope_text);
  if (!scope.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("materialization index member \"", member, "\": ", scope.status().message()));
  }
  parsed.scope = *scope;
  return parsed;
}

OwnershipKeys OwnershipKeys::For(const KeyPrefix& prefix, absl::string_view unit) {
  const std::string base = absl::StrCat(prefix.value(), ":own:v1:", unit);
  return {absl::StrCat(base, ":epoch"), absl::StrCat(base, ":owner")};
}

std::string SpliceAckedKey(const KeyPrefix& prefix, absl::string_view target_uid,
                           const core::GroupVersionResource& gvr, const core::WatchScope& scope) {
  return absl::StrCat(prefix.value(), ":splice:v1:", EscapeKeySegment(target_uid), ":",
                      GroupResourceSegment(gvr), ":", ScopeSegment(scope), ":acked");
}

std::string SpliceAckedPattern(const KeyPrefix& prefix, absl::string_view target_uid) {
  return absl::StrCat(prefix.value(), ":splice:v1:", EscapeGlob(EscapeKeySegment(target_uid)),
                      ":*:acked");
}

std::string AdmissionFactKey(const KeyPrefix& prefix, absl::string_view group_resource,
                             AdmissionChange change, absl::string_view uid,
                             absl::string_view old_resource_version) {
  const std::string base = absl::StrCat(prefix.value(), ":author:v1:admission:", group_resource);
  switch (change) {
    case AdmissionChange::kCreate:
      return absl::StrCat(base, ":create:", EscapeKeySegment(uid));
    case AdmissionChange::kDelete:
      return absl::StrCat(base, ":delete:", EscapeKeySegment(uid));
    case AdmissionChange::kUpdate:
      break;
  }
  return absl::StrCat(base, ":update:", EscapeKeySegment(uid), ":",
                      EscapeKeySegment(old_resource_version));
}

std::string NamespaceDeletionKey(const KeyPrefix& prefix, absl::string_view namespace_) {
  return absl::StrCat(prefix.value(),
                      ":author:v1:namespace-deletion:", EscapeKeySegment(namespace_));
}

std::string AuthorFactExactKey(const KeyPrefix& prefix, absl::string_view group_resource,
                               absl::string_view uid, absl::string_view rv) {
  return absl::StrCat(AuthorAuditBase(prefix, group_resource), ":object:", EscapeKeySegment(uid),
                      ":", EscapeKeySegment(rv));
}

std::string AuthorFactLastKey(const KeyPrefix& prefix, absl::string_view group_resource,
                              absl::string_view uid) {
  return absl::StrCat(AuthorAuditBase(prefix, group_resource), ":object:", EscapeKeySegment(uid),
                      ":last");
}

std::string AuthorFactRvKey(const KeyPrefix& prefix, absl::string_view group_resource,
                            absl::string_view rv) {
  return absl::StrCat(AuthorAuditBase(prefix, group_resource), ":rv:", EscapeKeySegment(rv));
}

std::string AuthorFactSignalKey(const KeyPrefix& prefix, absl::string_view group_resource) {
  return absl::StrCat(prefix.value(), ":author:v1:recorded:", EscapeKeySegment(group_resource));
}

std::string AuthorFactPattern(const KeyPrefix& prefix) {
  return absl::StrCat(prefix.reference(), ":author:v1:audit:*");
}

std::string CommandAuthorKey(const KeyPrefix& prefix, absl::string_view commit_request_uid) {
  return absl::StrCat(prefix.reference(),
                      ":author:v1:command:", EscapeKeySegment(commit_request_uid));
}

std::string WatchCursorKey(const KeyPrefix& prefix, absl::string_view target_uid,
                           const core::GroupVersionResource& gvr, const core::WatchScope& scope) {
  std::string scope_part = scope.IsCluster()
                               ? std::string("cluster")
                               : absl::StrCat("namespace:", EscapeKeySegment(scope.namespace_));
  return absl::StrCat(prefix.reference(), ":watch:v1:target:", EscapeKeySegment(target_uid), ":",
                      GroupResourceSegment(gvr), ":", scope_part, ":last-rv");
}

std::string WatchCursorPattern(const KeyPrefix& prefix, absl::string_view target_uid) {
  return absl::StrCat(prefix.reference(),
                      ":watch:v1:target:", EscapeGlob(EscapeKeySegment(target_uid)), ":*:last-rv");
}

}  // namespace reverser::redisstore
