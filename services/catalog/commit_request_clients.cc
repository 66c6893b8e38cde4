#include "services/catalog/commit_request_clients.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/membership/ownership.h"
#include "libs/membership/units.h"
#include "libs/runtime/log.h"

namespace reverser::catalog {
namespace {

grpc::ChannelArguments ChannelArguments(const std::string& tls_server_name) {
  grpc::ChannelArguments args;
  if (!tls_server_name.empty()) args.SetSslTargetNameOverride(tls_server_name);
  return args;
}

absl::Status AttachError(const grpc::Status& status, const std::string& where) {
  return absl::UnavailableError(absl::StrCat("AttachCommit", where, ": ", status.error_message(),
                                             " (code ", static_cast<int>(status.error_code()),
                                             ")"));
}

}  // namespace

absl::StatusOr<std::optional<std::string>> RedisCommandAuthors::Lookup(const std::string& uid) {
  if (store_ == nullptr) {
    auto connected = redisstore::RedisConnection::Connect(options_);
    if (!connected.ok()) return connected.status();
    redis_ = std::move(*connected);
    store_ = std::make_unique<redisstore::AuthorFactStore>(redis_.get(), prefix_);
  }
  auto found = store_->LookupCommandAuthor(uid);
  if (!found.ok()) {
    store_.reset();  // the connection may be broken: reconnect next time
    redis_.reset();
    return found.status();
  }
  if (!found->has_value() || (*found)->author.empty()) return std::optional<std::string>();
  return std::optional<std::string>((*found)->author);
}

GrpcCommitAttacher::GrpcCommitAttacher(const std::string& address,
                                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                                       absl::Duration timeout, const std::string& tls_server_name)
    : stub_(reverser::v1::GitWorker::NewStub(
          grpc::CreateCustomChannel(address, credentials, ChannelArguments(tls_server_name)))),
      timeout_(timeout) {}

absl::StatusOr<reverser::v1::FinalizeResult> GrpcCommitAttacher::Attach(
    const reverser::v1::AttachCommitRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  reverser::v1::FinalizeResult result;
  grpc::Status status = stub_->AttachCommit(&context, request, &result);
  if (!status.ok()) return AttachError(status, "");
  return result;
}

RoutedCommitAttacher::RoutedCommitAttacher(TablesSource tables,
                                           const membership::MembershipSource* members,
                                           RoutedCommitAttacherOptions options)
    : tables_(std::move(tables)), members_(members), options_(std::move(options)) {}

absl::StatusOr<RoutedCommitAttacher::Route> RoutedCommitAttacher::RouteOf(
    const reverser::v1::GitTargetRef& target) const {
  std::optional<reverser::v1::TableUpdate> tables = tables_();
  if (!tables) return absl::UnavailableError("no target configs published yet");
  // The unit set every gitworker and splicer uses: the branch of every GitTarget config.
  std::vector<std::string> units;
  std::string unit;
  for (const reverser::v1::WatchedTypeTable& table : tables->upserted()) {
    if (!table.has_config()) continue;
    const reverser::v1::GitDestination& d = table.config().destination();
    units.push_back(membership::BranchUnit(d.provider_namespace(), d.provider_name(), d.branch()));
    if (table.config().target().namespace_() == target.namespace_() &&
        table.config().target().name() == target.name()) {
      unit = units.back();
    }
  }
  if (unit.empty()) {
    return absl::UnavailableError(absl::StrCat("GitTarget ", target.namespace_(), "/",
                                               target.name(), " has no published config"));
  }
  membership::OwnershipTable table("");  // a router: owners only
  table.SetUnits(std::move(units));
  table.SetMembership(members_->Current());
  std::optional<std::string> owner = table.OwnerOf(unit);
  if (!owner) {
    return absl::UnavailableError(
        absl::StrCat("no live gitworker replica owns ", unit,
                     table.membership().synced ? "" : " (the gitworkers' Leases not read yet)"));
  }
  std::string address = table.AddressOf(*owner).value_or("");
  if (address.empty()) {
    return absl::UnavailableError(
        absl::StrCat("gitworker replica ", *owner, " (owner of ", unit, ") has no address"));
  }
  return Route{unit, *owner, address};
}

grpc::Status RoutedCommitAttacher::Call(const std::string& address,
                                        const reverser::v1::AttachCommitRequest& request,
                                        reverser::v1::FinalizeResult* result) {
  reverser::v1::GitWorker::Stub* stub = nullptr;
  {
    std::lock_guard lock(mu_);
    auto& slot = stubs_[address];
    if (!slot) {
      slot = reverser::v1::GitWorker::NewStub(grpc::CreateCustomChannel(
          address, options_.credentials, ChannelArguments(options_.tls_server_name)));
    }
    stub = slot.get();
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  return stub->AttachCommit(&context, request, result);
}

absl::StatusOr<reverser::v1::FinalizeResult> RoutedCommitAttacher::Attach(
    const reverser::v1::AttachCommitRequest& request) {
  absl::StatusOr<Route> route = RouteOf(request.target());
  if (!route.ok()) return route.status();
  reverser::v1::FinalizeResult result;
  grpc::Status status = Call(route->address, request, &result);
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    // Not the owner (its view differs from ours for now): once more, at the owner a fresh look
    // computes, else at the one the refusal names.
    reverser::v1::NotOwner refusal;
    refusal.ParseFromString(status.error_details());
    absl::StatusOr<Route> again = RouteOf(request.target());
    std::string address = again.ok() ? again->address : "";
    if ((address.empty() || address == route->address) && !refusal.owner_address().empty()) {
      address = refusal.owner_address();
    }
    runtime::LogInfo("AttachCommit refused by a gitworker that does not own the branch",
                     {{"gitworker", route->address},
                      {"unit", route->unit},
                      {"named_owner", refusal.owner_replica()},
                      {"retry_at", address}});
    if (address.empty() || address == route->address) {
      return AttachError(status, absl::StrCat(" at ", route->address));
    }
    result.Clear();
    status = Call(address, request, &result);
    if (!status.ok()) return AttachError(status, absl::StrCat(" at ", address));
    return result;
  }
  if (!status.ok()) return AttachError(status, absl::StrCat(" at ", route->address));
  return result;
}

}  // namespace reverser::catalog
