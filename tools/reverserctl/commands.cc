#include "tools/reverserctl/commands.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/rules/claim_syntax.h"
#include "nlohmann/json.hpp"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"
#include "tools/reverserctl/commit_command.h"
#include "tools/reverserctl/format.h"
#include "tools/reverserctl/table.h"
#include "tools/reverserctl/targets.h"

namespace reverser::reverserctl {
namespace {

using grpc::health::v1::HealthCheckResponse;

// The subscriber name services log for the Watch* streams this tool opens.
constexpr char kSubscriber[] = "reverserctl";

int UsageError(const CommandContext& ctx, const std::string& message) {
  ctx.err << "reverserctl: " << message << "\n";
  return kUsage;
}

int Failed(const CommandContext& ctx, const std::string& message) {
  ctx.err << "reverserctl: " << message << "\n";
  return kFailed;
}

// ---- every service -------------------------------------------------------------------------

template <typename Admin>
grpc::Status CallStatus(const Connection& conn, reverser::v1::ServiceStatus* out) {
  auto stub = Admin::NewStub(conn.channel());
  grpc::ClientContext context;
  conn.Prepare(&context);
  return stub->Status(&context, reverser::v1::StatusRequest(), out);
}

int RunStatus(const CommandContext& ctx) {
  const std::string& service = ctx.conn().service();
  reverser::v1::ServiceStatus out;
  grpc::Status status;
  if (service == "catalog") {
    status = CallStatus<reverser::v1::CatalogAdmin>(ctx.conn(), &out);
  } else if (service == "materializer") {
    status = CallStatus<reverser::v1::MaterializerAdmin>(ctx.conn(), &out);
  } else if (service == "splicer") {
    status = CallStatus<reverser::v1::SplicerAdmin>(ctx.conn(), &out);
  } else {
    status = CallStatus<reverser::v1::GitWorkerAdmin>(ctx.conn(), &out);
  }
  if (!status.ok()) return ctx.RpcFailed(status);
  ctx.out << (ctx.json ? ToJson(out) : FormatStatus(out));
  return kOk;
}

// The standard health check of one service: its serving status name, or the failed call.
grpc::Status CheckHealth(const Connection& conn, HealthCheckResponse* response) {
  auto stub = grpc::health::v1::Health::NewStub(conn.channel());
  grpc::ClientContext context;
  conn.Prepare(&context);
  return stub->Check(&context, grpc::health::v1::HealthCheckRequest(), response);
}

int RunHealth(const CommandContext& ctx) {
  std::vector<Connection> targets;
  if (ctx.connection != nullptr) {
    targets.push_back(*ctx.connection);
  } else {
    for (const std::string& service : ServiceNames()) {
      auto address = ResolveAddress(ctx.invocation.options, service);
      if (!address.ok()) return Failed(ctx, std::string(address.status().message()));
      targets.emplace_back(service, *address, ctx.invocation.options, ctx.security);
    }
  }
  bool all_serving = true;
  nlohmann::json json = nlohmann::json::object();
  std::vector<std::vector<std::string>> rows;
  for (const Connection& conn : targets) {
    HealthCheckResponse response;
    grpc::Status status = CheckHealth(conn, &response);
    std::string state = status.ok() ? HealthCheckResponse::ServingStatus_Name(response.status())
                                    : StatusCodeName(status.error_code());
    if (!status.ok() || response.status() != HealthCheckResponse::SERVING) all_serving = false;
    if (!status.ok()) ctx.err << "reverserctl: " << conn.Describe(status) << "\n";
    json[conn.service()] = {{"address", conn.address()}, {"status", state}};
    rows.push_back({conn.service(), conn.address(), state});
  }
  if (ctx.json) {
    ctx.out << json.dump(2) << "\n";
  } else if (targets.size() == 1) {
    ctx.out << rows[0][2] << "\n";
  } else {
    Table table({"SERVICE", "ADDRESS", "STATUS"});
    for (auto& row : rows) table.AddRow(std::move(row));
    ctx.out << table.Render();
  }
  return all_serving ? kOk : kFailed;
}

// ---- catalog -------------------------------------------------------------------------------

int RunTypes(const CommandContext& ctx) {
  auto stub = reverser::v1::CatalogAdmin::NewStub(ctx.conn().channel());
  grpc::ClientContext context;
  ctx.conn().Prepare(&context);
  reverser::v1::ListTypesRequest request;
  // --why is about types that are not followed, so it implies --all.
  request.set_followable_only(!ctx.Switch("all") && !ctx.Switch("why"));
  reverser::v1::ListTypesResponse response;
  grpc::Status status = stub->ListTypes(&context, request, &response);
  if (!status.ok()) return ctx.RpcFailed(status);
  ctx.out << (ctx.json ? ToJson(response) : FormatTypes(response, ctx.Switch("why")));
  return kOk;
}

int RunRescan(const CommandContext& ctx) {
  auto stub = reverser::v1::CatalogAdmin::NewStub(ctx.conn().channel());
  grpc::ClientContext context;
  ctx.conn().Prepare(&context);
  reverser::v1::RescanResponse response;
  grpc::Status status = stub->Rescan(&context, reverser::v1::RescanRequest(), &response);
  if (!status.ok()) return ctx.RpcFailed(status);
  ctx.out << (ctx.json ? ToJson(response) : FormatRescan(response));
  return kOk;
}

// Reads a Catalog Watch* stream: the first message (the current state) and, with --watch, every
// later one until the stream ends. `open` starts the stream on a context.
template <typename Message, typename Open, typename Format>
int FollowStream(const CommandContext& ctx, Open open, Format format) {
  const bool watch = ctx.Switch("watch");
  grpc::ClientContext context;
  // The snapshot is bounded by --timeout; a watch runs until the service ends it (or Ctrl-C).
  if (!watch) ctx.conn().Prepare(&context);
  auto stub = reverser::v1::Catalog::NewStub(ctx.conn().channel());
  auto reader = open(stub.get(), &context);
  Message message;
  bool first = true;
  while (reader->Read(&message)) {
    if (ctx.json) {
      ctx.out << ToJson(message, /*pretty=*/!watch);
    } else {
      if (!first) ctx.out << "\n";
      ctx.out << format(message);
    }
    ctx.out.flush();
    first = false;
    if (!watch) {
      context.TryCancel();
      reader->Finish();
      return kOk;
    }
  }
  grpc::Status status = reader->Finish();
  if (first && status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // The catalog publishes nothing before its first reconcile: say so instead of a bare code.
    return Failed(ctx,
                  ctx.conn().Describe(status) +
                      " (nothing published yet; is it ready? see `reverserctl status catalog`)");
  }
  if (!status.ok()) return ctx.RpcFailed(status);
  if (first) return Failed(ctx, ctx.conn().Describe(status) + ": the stream ended without data");
  return kOk;
}

int RunClaims(const CommandContext& ctx) {
  return FollowStream<reverser::v1::ClaimSet>(
      ctx,
      [](reverser::v1::Catalog::Stub* stub, grpc::ClientContext* context) {
        reverser::v1::WatchClaimsRequest request;
        request.set_subscriber(kSubscriber);
        return stub->WatchClaims(context, request);
      },
      [](const reverser::v1::ClaimSet& set) { return FormatClaims(set); });
}

int RunTables(const CommandContext& ctx) {
  return FollowStream<reverser::v1::TableUpdate>(
      ctx,
      [](reverser::v1::Catalog::Stub* stub, grpc::ClientContext* context) {
        reverser::v1::WatchTablesRequest request;
        request.set_subscriber(kSubscriber);
        return stub->WatchTables(context, request);
      },
      [](const reverser::v1::TableUpdate& update) { return FormatTables(update); });
}

// ---- materializer --------------------------------------------------------------------------

int RunMaterializations(const CommandContext& ctx) {
  auto stub = reverser::v1::MaterializerAdmin::NewStub(ctx.conn().channel());
  grpc::ClientContext context;
  ctx.conn().Prepare(&context);
  reverser::v1::ListMaterializationsResponse response;
  grpc::Status status =
      stub->ListMaterializations(&context, reverser::v1::ListMaterializationsRequest(), &response);
  if (!status.ok()) return ctx.RpcFailed(status);
  ctx.out << (ctx.json ? ToJson(response) : FormatMaterializations(response));
  return kOk;
}

int RunCompact(const CommandContext& ctx) {
  reverser::v1::CompactRequest request;
  if (!ctx.invocation.args.empty()) {
    auto claim = rules::ParseClaim(ctx.invocation.args[0]);
    if (!claim.ok()) return UsageError(ctx, std::string(claim.status().message()));
    *request.mutable_claim() = *claim;
  }
  auto stub = reverser::v1::MaterializerAdmin::NewStub(ctx.conn().channel());
  grpc::ClientContext context;
  ctx.conn().Prepare(&context);
  reverser::v1::CompactResponse response;
  grpc::Status status = stub->Compact(&context, request, &response);
  if (!status.ok()) return ctx.RpcFailed(status);
  ctx.out << (ctx.json ? ToJson(response) : FormatCompact(response));
  int failed = 0;
  for (const auto& result : response.results()) {
    if (result.error().empty()) continue;
    ++failed;
    ctx.err << "reverserctl: " << rules::FormatClaim(result.claim()) << ": " << result.error()
            << "\n";
  }
  return failed == 0 ? kOk : kFailed;
}

// ---- splicer -------------------------------------------------------------------------------

grpc::Status ListStreams(const Connection& conn, reverser::v1::ListStreamsResponse* response) {
  auto stub = reverser::v1::SplicerAdmin::NewStub(conn.channel());
  grpc::ClientContext context;
  conn.Prepare(&context);
  return stub->ListStreams(&context, reverser::v1::ListStreamsRequest(), response);
}

int RunStreams(const CommandContext& ctx) {
  const std::string* only = ctx.invocation.args.empty() ? nullptr : &ctx.invocation.args[0];
  if (only != nullptr && !IsTargetName(*only)) {
    return UsageError(ctx, "target \"" + *only + "\" is not namespace/name");
  }
  reverser::v1::ListStreamsResponse response;
  grpc::Status status = ListStreams(ctx.conn(), &response);
  if (!status.ok()) return ctx.RpcFailed(status);
  if (only != nullptr) {
    // The request filters by uid, which operators do not know: filter by name here.
    auto summary = FindTarget(response, *only);
    if (!summary.ok()) {
      return Failed(ctx, absl::StrCat(ctx.conn().service(), " at ", ctx.conn().address(), " ",
                                      summary.status().message()));
    }
    reverser::v1::StreamSummary kept = **summary;
    response.clear_summaries();
    *response.add_summaries() = std::move(kept);
  }
  ctx.out << (ctx.json ? ToJson(response) : FormatStreams(response, ctx.Switch("detail")));
  return kOk;
}

int RunResplice(const CommandContext& ctx) {
  const std::string& name = ctx.invocation.args[0];
  if (!IsTargetName(name)) return UsageError(ctx, "target \"" + name + "\" is not namespace/name");
  // The splicer knows targets by uid: find it (and the stream's full claim) by name first.
  reverser::v1::ListStreamsResponse streams;
  grpc::Status status = ListStreams(ctx.conn(), &streams);
  if (!status.ok()) return ctx.RpcFailed(status);
  auto summary = FindTarget(streams, name);
  if (!summary.ok()) {
    return Failed(ctx, absl::StrCat(ctx.conn().service(), " at ", ctx.conn().address(), " ",
                                    summary.status().message()));
  }
  reverser::v1::RespliceRequest request;
  *request.mutable_target() = (*summary)->target();
  if (ctx.invocation.args.size() > 1) {
    auto claim = FindStream(**summary, ctx.invocation.args[1]);
    if (absl::IsInvalidArgument(claim.status())) {
      return UsageError(ctx, std::string(claim.status().message()));
    }
    if (!claim.ok()) return Failed(ctx, std::string(claim.status().message()));
    *request.mutable_claim() = *claim;
  }
  auto stub = reverser::v1::SplicerAdmin::NewStub(ctx.conn().channel());
  grpc::ClientContext context;
  ctx.conn().Prepare(&context);
  reverser::v1::RespliceResponse response;
  status = stub->Resplice(&context, request, &response);
  if (!status.ok()) return ctx.RpcFailed(status);
  ctx.out << (ctx.json ? ToJson(response) : FormatResplice((*summary)->target(), response));
  return kOk;
}

// ---- gitworker -----------------------------------------------------------------------------

int RunBranches(const CommandContext& ctx) {
  auto stub = reverser::v1::GitWorkerAdmin::NewStub(ctx.conn().channel());
  grpc::ClientContext context;
  ctx.conn().Prepare(&context);
  reverser::v1::ListBranchesResponse response;
  grpc::Status status =
      stub->ListBranches(&context, reverser::v1::ListBranchesRequest(), &response);
  if (!status.ok()) return ctx.RpcFailed(status);
  ctx.out << (ctx.json ? ToJson(response) : FormatBranches(response));
  return kOk;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

}  // namespace

int CommandContext::RpcFailed(const grpc::Status& status) const {
  err << "reverserctl: " << connection->Describe(status) << "\n";
  return kFailed;
}

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"health",
       "health [SERVICE]",
       "standard gRPC health check of one or every service",
       "Asks the standard grpc.health.v1 service. Without SERVICE every service is checked\n"
       "(or the one --addr). Prints SERVING (per service); exit 0 only if all are SERVING.",
       "",
       0,
       1,
       {},
       RunHealth},
      {"status",
       "status SERVICE",
       "a service's process status: readiness, components, details",
       "SERVICE is catalog, materializer, splicer or gitworker.",
       "",
       1,
       1,
       {},
       RunStatus},
      {"types",
       "types [--all] [--why]",
       "catalog: the served types and whether they are followed",
       "Lists the type registry. By default only followable types; --all adds retained, refused\n"
       "and unknown ones; --why (implies --all) adds a REASON column with every failed\n"
       "requirement check, i.e. why a type is not followed.",
       "catalog",
       0,
       0,
       {"all", "why"},
       RunTypes},
      {"rescan",
       "rescan",
       "catalog: rediscover the API's types now",
       "Runs discovery now and waits for the new registry generation (bounded by --timeout).",
       "catalog",
       0,
       0,
       {},
       RunRescan},
      {"claims",
       "claims [--watch]",
       "catalog: the claim set (type + scope) materializers follow",
       "Prints the current claim set from Catalog.WatchClaims and exits; --watch keeps\n"
       "following and prints every new set (with -o json: one JSON document per line).",
       "catalog",
       0,
       0,
       {"watch"},
       RunClaims},
      {"tables",
       "tables [--watch]",
       "catalog: each GitTarget's watched-type table",
       "Prints the current watched-type tables from Catalog.WatchTables (one row per target,\n"
       "type and namespace) and exits; --watch keeps following and prints every update.",
       "catalog",
       0,
       0,
       {"watch"},
       RunTables},
      {"materializations",
       "materializations",
       "materializer: each claim's phase, checkpoint and stream",
       "Lists the materializer's materializations.",
       "materializer",
       0,
       0,
       {},
       RunMaterializations},
      {"compact",
       "compact [CLAIM]",
       "materializer: fold streams into new checkpoints now",
       "Folds the stream of CLAIM (group/version/resource[@namespace], core types as\n"
       "v1/configmaps), or of every claim the materializer owns, into a new checkpoint; no API\n"
       "call. Exit 1 if any claim failed.",
       "materializer",
       0,
       1,
       {},
       RunCompact},
      {"streams",
       "streams [NAMESPACE/NAME] [--detail]",
       "splicer: per-GitTarget stream readiness",
       "Lists every GitTarget's streams as the splicer sees them (or only NAMESPACE/NAME);\n"
       "--detail adds one row per stream with its state and reason.",
       "splicer",
       0,
       1,
       {"detail"},
       RunStreams},
      {"resplice",
       "resplice NAMESPACE/NAME [TYPE]",
       "splicer: splice a target's streams again",
       "Forces a fresh splice, and so a mark-and-sweep resync in Git, of every stream of the\n"
       "GitTarget NAMESPACE/NAME, or of its one stream TYPE (group/version/resource[@namespace];\n"
       "the namespace is needed only when the target follows the type in several).",
       "splicer",
       1,
       2,
       {},
       RunResplice},
      {"branches",
       "branches",
       "gitworker: branches, open windows, pending writes, last push",
       "Lists the gitworker's branches: head commit, writes not yet pushed, whether a commit\n"
       "window is open, the last push and its error.",
       "gitworker",
       0,
       0,
       {},
       RunBranches},
      {"commit",
       "commit NAMESPACE/TARGET -m MESSAGE [--close-delay=SECONDS] [--name=NAME] [--no-wait]",
       "Kubernetes: commit your open changes on a GitTarget now",
       "Creates a CommitRequest (configbutler.ai/v1alpha3) for the GitTarget TARGET in NAMESPACE\n"
       "through the Kubernetes API as the kubeconfig's user, whom admission records as the\n"
       "commit's author; no mesh flags are needed.\n"
       "  -m, --message=MESSAGE  the commit message: 1 to 1024 characters, newlines allowed,\n"
       "                         other control characters not (required)\n"
       "  --close-delay=SECONDS  keep collecting your changes this long first (0 to 300,\n"
       "                         default 0)\n"
       "  --name=NAME            the request's name (default: TARGET-<random suffix>)\n"
       "  --no-wait              print the request's name and exit\n"
       "Otherwise waits, bounded by --timeout (default 7m30s, beyond the catalog's 420 s safety\n"
       "window), for the outcome the catalog writes, and prints it (e.g. `commitrequest\n"
       "NAMESPACE/NAME: Committed SHA on BRANCH`; -o json: the object). Exit 0 when Ready=True\n"
       "(Committed, AlreadyPresent, NoWindowInGrace); 1 when it failed (WindowMismatch,\n"
       "FinalizeFailed, UnexpectedOutcome), no outcome came in time or an API call failed.",
       kKubernetesService,
       1,
       1,
       {"no-wait"},
       RunCommit,
       {{"message", "m"}, {"close-delay", ""}, {"name", ""}},
       kCommitDefaultTimeout},
  };
  return *commands;
}

std::string ToolUsage() {
  std::string out =
      "reverserctl — administer the reverser services over their gRPC admin APIs (commit: over\n"
      "the Kubernetes API).\n\n"
      "Usage: reverserctl [options] COMMAND [args]\n\nCommands:\n";
  for (const Command& c : Commands()) {
    std::string synopsis = c.synopsis;
    // A long synopsis gets its own line, the summary under the others' summaries.
    if (synopsis.size() > 36) synopsis = absl::StrCat(synopsis, "\n", std::string(38, ' '));
    if (synopsis.size() < 36) synopsis.resize(36, ' ');
    absl::StrAppend(&out, "  ", synopsis, " ", c.summary, "\n");
  }
  absl::StrAppend(&out, "\n", GlobalOptionsHelp(),
                  "\nExit codes: 0 ok, 1 a call failed (or reported failure), 2 bad arguments.\n"
                  "`reverserctl COMMAND --help` describes one command.\n");
  return out;
}

std::string CommandUsage(const Command& command) {
  return absl::StrCat("Usage: reverserctl [options] ", command.synopsis, "\n\n", command.help,
                      "\n\n", GlobalOptionsHelp());
}

int Run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  std::vector<ValueOption> value_options;
  for (const Command& command : Commands()) {
    value_options.insert(value_options.end(), command.values.begin(), command.values.end());
  }
  auto parsed = ParseArgs(argv, value_options);
  if (!parsed.ok()) {
    err << "reverserctl: " << parsed.status().message() << "\n\n" << ToolUsage();
    return kUsage;
  }
  const Invocation& inv = *parsed;
  if (inv.command.empty() || inv.command == "help") {
    if (inv.help || inv.command == "help") {
      out << ToolUsage();
      return kOk;
    }
    err << "reverserctl: missing command\n\n" << ToolUsage();
    return kUsage;
  }
  const Command* command = FindCommand(inv.command);
  if (command == nullptr) {
    err << "reverserctl: unknown command \"" << inv.command << "\"\n\n" << ToolUsage();
    return kUsage;
  }
  if (inv.help) {
    out << CommandUsage(*command);
    return kOk;
  }
  auto usage_error = [&](const std::string& message) {
    err << "reverserctl: " << message << "\n\n" << CommandUsage(*command);
    return kUsage;
  };
  for (const std::string& s : inv.switches) {
    if (std::find(command->switches.begin(), command->switches.end(), s) ==
        command->switches.end()) {
      return usage_error(absl::StrCat(command->name, " has no option --", s));
    }
  }
  for (const auto& [name, value] : inv.values) {
    if (std::none_of(command->values.begin(), command->values.end(),
                     [&name = name](const ValueOption& option) { return option.name == name; })) {
      return usage_error(absl::StrCat(command->name, " has no option --", name));
    }
  }
  if (inv.args.size() < command->min_args || inv.args.size() > command->max_args) {
    return usage_error(
        absl::StrCat(command->name, " takes ",
                     command->min_args == command->max_args
                         ? absl::StrCat(command->min_args)
                         : absl::StrCat(command->min_args, " to ", command->max_args),
                     " argument(s), got ", inv.args.size()));
  }
  std::string service = command->service;
  if (service.empty() && !inv.args.empty()) {
    service = inv.args[0];
    if (!IsServiceName(service)) {
      return usage_error(absl::StrCat("unknown service \"", service,
                                      "\": expected catalog, materializer, splicer or gitworker"));
    }
  }
  Invocation resolved = inv;
  if (!inv.options.timeout_given && command->default_timeout > absl::ZeroDuration()) {
    resolved.options.timeout = command->default_timeout;
  }
  const bool json = resolved.options.output == OutputFormat::kJson;
  if (service == kKubernetesService) {
    // The command reads the kubeconfig itself, after checking its own arguments.
    const runtime::GrpcSecurity no_mesh;
    CommandContext ctx{resolved, nullptr, no_mesh, json, out, err};
    return command->run(ctx);
  }
  absl::StatusOr<runtime::GrpcSecurity> security = SecurityOf(inv.options);
  if (!security.ok()) return usage_error(std::string(security.status().message()));
  absl::StatusOr<std::string> token = BearerTokenOf(inv.options);
  if (!token.ok()) return usage_error(std::string(token.status().message()));
  resolved.options.token = *token;
  std::optional<Connection> connection;
  if (!service.empty() || !resolved.options.addr.empty()) {
    if (service.empty()) service = "service";  // `--addr=... health`: the one address given
    auto address = ResolveAddress(resolved.options, service);
    if (!address.ok()) {
      err << "reverserctl: " << address.status().message() << "\n";
      return kFailed;
    }
    connection.emplace(service, *address, resolved.options, *security);
  }
  CommandContext ctx{resolved, connection ? &*connection : nullptr, *security, json, out, err};
  return command->run(ctx);
}

}  // namespace reverser::reverserctl
