#include "tools/reverserctl/format.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "libs/rules/claim_syntax.h"
#include "tools/reverserctl/table.h"

namespace reverser::reverserctl {
namespace {

// Enum names without their type prefix: FOLLOW_VERDICT_REFUSED -> REFUSED.
std::string ShortEnum(const std::string& name, absl::string_view prefix) {
  if (name.rfind(std::string(prefix), 0) == 0) return name.substr(prefix.size());
  return name.empty() ? "?" : name;
}

std::string YesNo(bool value) { return value ? "yes" : "no"; }

std::string FormatPosition(const reverser::v1::StreamPosition& position) {
  if (position.rv() == 0 && position.seq() == 0) return "";
  return absl::StrCat(position.rv(), "-", position.seq());
}

std::string FormatOperations(const reverser::v1::OperationSet& ops) {
  if (ops.all() || ops.operations_size() == 0) return "all";
  std::vector<std::string> names;
  for (int op : ops.operations()) {
    names.push_back(ShortEnum(
        reverser::v1::Operation_Name(static_cast<reverser::v1::Operation>(op)), "OPERATION_"));
  }
  return absl::StrJoin(names, ",");
}

std::string ClaimText(const reverser::v1::Claim& claim) { return rules::FormatClaim(claim); }

}  // namespace

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = false;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return absl::StrCat("{\"error\": \"cannot render as JSON\"}\n");
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

std::string FormatGvr(const reverser::v1::GroupVersionResource& gvr) {
  if (gvr.resource().empty()) return "";  // not filled in by the service
  if (gvr.group().empty()) return absl::StrCat(gvr.version(), "/", gvr.resource());
  return absl::StrCat(gvr.group(), "/", gvr.version(), "/", gvr.resource());
}

std::string FormatScope(const reverser::v1::WatchScope& scope) {
  switch (scope.scope_case()) {
    case reverser::v1::WatchScope::kNamespace:
      return scope.namespace_();
    case reverser::v1::WatchScope::kCluster:
      return "cluster";
    default:
      return "";  // not filled in by the service
  }
}

std::string FormatTarget(const reverser::v1::GitTargetRef& target) {
  return absl::StrCat(target.namespace_(), "/", target.name());
}

std::string FormatTime(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "";
  absl::Time t = absl::FromUnixSeconds(time.seconds()) + absl::Nanoseconds(time.nanos());
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string FormatStatus(const reverser::v1::ServiceStatus& status) {
  std::string out;
  Table head({"SERVICE", "INSTANCE", "VERSION", "READY", "STARTED", "GRPC", "HTTP"});
  head.AddRow({status.service(), status.instance(), status.version(), YesNo(status.ready()),
               FormatTime(status.started_at()), absl::StrCat(status.grpc_port()),
               absl::StrCat(status.http_port())});
  out += head.Render();
  if (status.components_size() > 0) {
    Table components({"COMPONENT", "READY", "DETAIL"});
    for (const auto& c : status.components()) {
      components.AddRow({c.name(), YesNo(c.ready()), c.detail()});
    }
    out += "\n" + components.Render();
  }
  if (!status.details().empty()) {
    // The map is unordered on the wire; sorted keys keep the output stable.
    std::map<std::string, std::string> sorted(status.details().begin(), status.details().end());
    Table details({"DETAIL", "VALUE"});
    for (const auto& [key, value] : sorted) details.AddRow({key, value});
    out += "\n" + details.Render();
  }
  return out;
}

std::string FormatTypes(const reverser::v1::ListTypesResponse& types, bool why) {
  std::vector<std::string> headers = {"RESOURCE", "KIND", "SCOPE", "ORIGIN", "VERDICT"};
  if (why) headers.push_back("REASON");
  Table table(headers);
  for (const auto& record : types.records()) {
    const auto& id = record.identity();
    std::string kind = id.gvk().kind();
    if (record.preferred_version()) kind += "*";
    if (record.sensitive()) kind += " (sensitive)";
    std::vector<std::string> row = {
        FormatGvr(id.gvr()), kind,
        id.scope() == reverser::v1::RESOURCE_SCOPE_CLUSTER ? "cluster" : "namespaced",
        record.origin(),
        ShortEnum(reverser::v1::FollowVerdict_Name(record.verdict()), "FOLLOW_VERDICT_")};
    if (why) {
      std::vector<std::string> failed;
      for (const auto& check : record.checks()) {
        if (check.passed()) continue;
        std::string text = absl::StrCat(check.requirement(), ": ", check.reason());
        if (!check.detail().empty()) absl::StrAppend(&text, " (", check.detail(), ")");
        failed.push_back(text);
      }
      // Without failed checks the summary still says why (e.g. retained in the grace).
      row.push_back(failed.empty() ? (record.verdict() == reverser::v1::FOLLOW_VERDICT_FOLLOWABLE
                                          ? ""
                                          : record.summary())
                                   : absl::StrJoin(failed, "; "));
    }
    table.AddRow(std::move(row));
  }
  return absl::StrCat(table.Render(), types.records_size(), " type(s) at registry generation ",
                      types.generation(), " (* = preferred version)\n");
}

std::string FormatRescan(const reverser::v1::RescanResponse& rescan) {
  std::string out = absl::StrCat("rescanned: registry generation ", rescan.generation(), ", ",
                                 rescan.types(), " type(s)\n");
  for (const auto& gv : rescan.degraded_group_versions()) {
    absl::StrAppend(&out, "degraded: ", gv, " (discovery failed; its types are retained)\n");
  }
  return out;
}

std::string FormatClaims(const reverser::v1::ClaimSet& claims) {
  Table table({"CLAIM", "KIND", "SCOPE"});
  for (const auto& claim : claims.claims()) {
    table.AddRow({ClaimText(claim), claim.type().gvk().kind(), FormatScope(claim.scope())});
  }
  return absl::StrCat(table.Render(), claims.claims_size(), " claim(s) at generation ",
                      claims.generation(), "\n");
}

std::string FormatTables(const reverser::v1::TableUpdate& update) {
  Table table({"TARGET", "DESTINATION", "TYPE", "NAMESPACE", "OPERATIONS"});
  for (const auto& t : update.upserted()) {
    const auto& d = t.destination();
    std::string destination = absl::StrCat(d.provider_namespace(), "/", d.provider_name(), " ",
                                           d.branch(), ":", d.path());
    if (t.types_size() == 0) table.AddRow({FormatTarget(t.target()), destination, "(none)"});
    for (const auto& type : t.types()) {
      // Namespaces sorted: the map has no order on the wire.
      std::map<std::string, reverser::v1::OperationSet> namespaces(type.namespaces().begin(),
                                                                   type.namespaces().end());
      for (const auto& [ns, ops] : namespaces) {
        table.AddRow({FormatTarget(t.target()), destination, FormatGvr(type.type().gvr()),
                      ns.empty() ? "(all)" : ns, FormatOperations(ops)});
      }
    }
  }
  std::string out = table.Render();
  for (const auto& removed : update.removed()) {
    absl::StrAppend(&out, "removed: ", FormatTarget(removed), "\n");
  }
  absl::StrAppend(&out, update.upserted_size(), " table(s) at generation ", update.generation(),
                  update.full() ? " (complete set)" : " (changes only)", "\n");
  return out;
}

std::string FormatStreams(const reverser::v1::ListStreamsResponse& streams, bool detail) {
  Table summary({"TARGET", "READY", "REPLAYING", "BLOCKED", "REASON", "PENDING", "OBSERVED"});
  Table each({"TARGET", "TYPE", "SCOPE", "STATE", "REASON", "MESSAGE"});
  for (const auto& s : streams.summaries()) {
    summary.AddRow({FormatTarget(s.target()), absl::StrCat(s.ready(), "/", s.total()),
                    absl::StrCat(s.replaying()), absl::StrCat(s.blocked()), s.reason(),
                    absl::StrJoin(s.pending_sample(), ", "), FormatTime(s.observed_time())});
    for (const auto& stream : s.streams()) {
      each.AddRow({FormatTarget(s.target()), FormatGvr(stream.claim().type().gvr()),
                   FormatScope(stream.claim().scope()),
                   ShortEnum(reverser::v1::StreamState_Name(stream.state()), "STREAM_STATE_"),
                   stream.reason(), stream.message()});
    }
  }
  std::string out = summary.Render();
  if (detail) out += "\n" + each.Render();
  return out;
}

std::string FormatResplice(const reverser::v1::GitTargetRef& target,
                           const reverser::v1::RespliceResponse& resplice) {
  return absl::StrCat("resplicing ", resplice.streams(), " stream(s) of ", FormatTarget(target),
                      "\n");
}

std::string FormatBranches(const reverser::v1::ListBranchesResponse& branches) {
  // With replicas (the gitworker asked them all): who owns each branch, and who did not answer.
  bool replicas = branches.replicas_size() > 0;
  for (const auto& b : branches.branches()) replicas = replicas || !b.owner_replica().empty();
  std::vector<std::string> header = {"PROVIDER", "BRANCH", "PATH",      "HEAD",
                                     "PENDING",  "WINDOW", "LAST PUSH", "LAST ERROR"};
  if (replicas) header.insert(header.begin() + 2, "OWNER");
  Table table(header);
  for (const auto& b : branches.branches()) {
    const auto& d = b.destination();
    std::vector<std::string> row = {absl::StrCat(d.provider_namespace(), "/", d.provider_name()),
                                    d.branch(),
                                    d.path(),
                                    b.head_sha().substr(0, 12),
                                    absl::StrCat(b.pending_writes()),
                                    b.window_open() ? "open" : "closed",
                                    FormatTime(b.last_push()),
                                    b.last_error()};
    if (replicas) {
      std::string owner = b.owner_replica().empty() ? b.reported_by() : b.owner_replica();
      row.insert(row.begin() + 2, owner.empty() ? "-" : owner);
    }
    table.AddRow(row);
  }
  std::string out = table.Render();
  for (const auto& r : branches.replicas()) {
    if (r.answered()) continue;
    absl::StrAppend(&out, "replica ", r.replica(), r.address().empty() ? "" : " at ", r.address(),
                    " did not answer: ", r.error(), "\n");
  }
  return out;
}

std::string FormatMaterializations(const reverser::v1::ListMaterializationsResponse& list) {
  Table table(
      {"CLAIM", "PHASE", "REASON", "CHECKPOINT", "ITEMS", "STREAM", "HEAD", "REPLAYS", "UPDATED"});
  for (const auto& m : list.materializations()) {
    table.AddRow(
        {ClaimText(m.claim()),
         ShortEnum(reverser::v1::MaterializationPhase_Name(m.phase()), "MATERIALIZATION_PHASE_"),
         m.reason(), absl::StrCat(m.checkpoint_revision()), absl::StrCat(m.checkpoint_items()),
         absl::StrCat(m.stream_length()), FormatPosition(m.stream_head()),
         absl::StrCat(m.replays()), FormatTime(m.updated_at())});
  }
  return table.Render();
}

std::string FormatCompact(const reverser::v1::CompactResponse& compact) {
  Table table({"CLAIM", "COMPACTED", "FOLDED", "TRIMMED", "CHECKPOINT", "ERROR"});
  for (const auto& r : compact.results()) {
    table.AddRow({ClaimText(r.claim()), YesNo(r.compacted()), absl::StrCat(r.folded()),
                  absl::StrCat(r.trimmed()), FormatPosition(r.checkpoint()), r.error()});
  }
  return table.Render();
}

}  // namespace reverser::reverserctl
