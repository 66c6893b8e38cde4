#include "services/materializer/admission_webhook.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "libs/core/json_depth.h"
#include "libs/runtime/log.h"

namespace reverser::materializer {
namespace {

// An AdmissionReview is a few levels around two objects that the API server accepted.
constexpr int64_t kMaxReviewDepth = core::kApiObjectMaxDepth + 8;

const nlohmann::json& At(const nlohmann::json& node, std::initializer_list<const char*> path) {
  static const nlohmann::json kNull;
  const nlohmann::json* at = &node;
  for (const char* key : path) {
    if (!at->is_object()) return kNull;
    auto it = at->find(key);
    if (it == at->end()) return kNull;
    at = &*it;
  }
  return *at;
}

std::string Text(const nlohmann::json& node, std::initializer_list<const char*> path) {
  const nlohmann::json& at = At(node, path);
  return at.is_string() ? at.get<std::string>() : "";
}

std::string Allowed(const std::string& uid) {
  return nlohmann::json{{"apiVersion", "admission.k8s.io/v1"},
                        {"kind", "AdmissionReview"},
                        {"response", {{"uid", uid}, {"allowed", true}}}}
      .dump();
}

}  // namespace

AdmissionReviewer::AdmissionReviewer(CommandAuthorSink* sink, const core::Clock* clock,
                                     runtime::MetricsRegistry* metrics, ChangeAuthorSink* changes)
    : sink_(sink), changes_(changes), clock_(clock), metrics_(metrics) {}

void AdmissionReviewer::Count(absl::string_view outcome) {
  if (metrics_ == nullptr) return;
  metrics_
      ->GetCounter("reverser_materializer_admission_reviews_total",
                   "AdmissionReviews answered, by outcome (recorded, skipped, dry_run, "
                   "record_failed; for change facts change_recorded, change_unkeyable, "
                   "change_record_failed; and the refusals: malformed, too_deep, too_large).",
                   {{"outcome", std::string(outcome)}})
      .Increment();
}

AdmissionAnswer AdmissionReviewer::Refuse(absl::string_view reason, absl::string_view message) {
  Count(reason);
  runtime::LogWarning("admission review refused",
                      {{"reason", std::string(reason)}, {"error", std::string(message)}});
  return {400, nlohmann::json{{"error", std::string(message)}}.dump()};
}

AdmissionAnswer AdmissionReviewer::Review(absl::string_view body) {
  if (core::JsonNestingDepth(body, kMaxReviewDepth) > kMaxReviewDepth) {
    return Refuse("too_deep", "the AdmissionReview nests deeper than any API object can");
  }
  nlohmann::json review = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) return Refuse("malformed", "the body is not JSON");
  const nlohmann::json& request = At(review, {"request"});
  const std::string uid = Text(review, {"request", "uid"});
  if (Text(review, {"kind"}) != "AdmissionReview" || !request.is_object() || uid.empty()) {
    return Refuse("malformed", "the body is not an AdmissionReview with a request uid");
  }
  const std::string operation = Text(request, {"operation"});
  const bool commit_request_create = operation == "CREATE" &&
                                     Text(request, {"resource", "group"}) == "configbutler.ai" &&
                                     Text(request, {"resource", "resource"}) == "commitrequests";
  const std::string subresource = Text(request, {"subResource"});
  const bool change = changes_ != nullptr && !commit_request_create &&
                      (operation == "CREATE" || operation == "UPDATE" || operation == "DELETE") &&
                      (subresource.empty() || subresource == "scale");
  const std::string object_uid = Text(request, {"object", "metadata", "uid"});
  const std::string user = Text(request, {"userInfo", "username"});
  if (user.empty() || (!change && (!commit_request_create || object_uid.empty() || !sink_))) {
    Count("skipped");
    return {200, Allowed(uid)};
  }
  if (const nlohmann::json& dry = At(request, {"dryRun"}); dry.is_boolean() && dry.get<bool>()) {
    Count("dry_run");
    return {200, Allowed(uid)};
  }
  if (change) {
    Count(RecordChange(request));
    return {200, Allowed(uid)};
  }
  redisstore::CommandAuthor author;
  author.author = user;
  author.requested_at = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", clock_->Now(), absl::UTCTimeZone());
  if (absl::Status s = sink_->RecordCommandAuthor(object_uid, author); !s.ok()) {
    // Still allowed: the request falls back to the committer rather than being blocked.
    Count("record_failed");
    runtime::LogWarning("command author not recorded",
                        {{"commitrequest",
                          absl::StrCat(Text(request, {"namespace"}), "/", Text(request, {"name"}))},
                         {"error", std::string(s.message())}});
    return {200, Allowed(uid)};
  }
  Count("recorded");
  return {200, Allowed(uid)};
}

absl::string_view AdmissionReviewer::RecordChange(const nlohmann::json& request) {
  const std::string operation = Text(request, {"operation"});
  redisstore::AdmissionFact admitted;
  admitted.request_uid = Text(request, {"uid"});
  redisstore::AuthorFact& fact = admitted.fact;
  // A delete names the object it removes only in oldObject; a create has no oldObject.
  const char* side = operation == "DELETE" ? "oldObject" : "object";
  if (operation == "CREATE") {
    admitted.change = redisstore::AdmissionChange::kCreate;
    fact.verb = "create";
  } else if (operation == "DELETE") {
    admitted.change = redisstore::AdmissionChange::kDelete;
    fact.verb = "delete";
  } else {
    admitted.change = redisstore::AdmissionChange::kUpdate;
    fact.verb = "update";  // a patch or an apply is admitted as an UPDATE too
    admitted.old_resource_version = Text(request, {"oldObject", "metadata", "resourceVersion"});
  }
  fact.group_resource = redisstore::GroupResourceSegment(Text(request, {"resource", "group"}),
                                                         Text(request, {"resource", "resource"}));
  fact.namespace_ = Text(request, {"namespace"});
  fact.name = Text(request, {"name"});
  if (fact.name.empty()) fact.name = Text(request, {side, "metadata", "name"});
  fact.uid = Text(request, {side, "metadata", "uid"});
  fact.author = Text(request, {"userInfo", "username"});
  fact.is_service_account = fact.author.rfind("system:serviceaccount:", 0) == 0;
  fact.subresource = Text(request, {"subResource"});
  fact.stage_timestamp =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E9SZ", clock_->Now(), absl::UTCTimeZone());
  absl::Status recorded = changes_->RecordAdmission(admitted);
  if (absl::IsInvalidArgument(recorded)) return "change_unkeyable";  // e.g. no uid: nothing keys it
  if (!recorded.ok()) {
    // Still allowed: the change is then the committer's rather than a blocked write.
    runtime::LogWarning("change author not recorded",
                        {{"resource", fact.group_resource},
                         {"object", absl::StrCat(fact.namespace_, "/", fact.name)},
                         {"error", std::string(recorded.message())}});
    return "change_record_failed";
  }
  return "change_recorded";
}

AdmissionWebhookServer::AdmissionWebhookServer(AdmissionWebhookOptions options,
                                               AdmissionReviewer* reviewer)
    : options_(std::move(options)), reviewer_(reviewer) {}

absl::StatusOr<int> AdmissionWebhookServer::Start() {
  if (!options_.insecure && (options_.tls.cert_file.empty() || options_.tls.key_file.empty())) {
    return absl::InvalidArgumentError(
        "the admission webhook needs --admission_tls_cert and --admission_tls_key (or "
        "--admission_insecure for local development)");
  }
  server_ = std::make_unique<runtime::HttpServer>(options_.insecure ? nullptr : &options_.tls);
  if (!server_->valid()) {
    return absl::InvalidArgumentError(
        "admission webhook TLS material could not be loaded (certificate or key)");
  }
  const size_t limit = options_.max_body_bytes;
  auto& routes = server_->routes();
  routes.Post(kAdmissionPath, [this, limit](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& reader) {
    size_t announced = 0;
    bool too_large =
        absl::SimpleAtoi(req.get_header_value("Content-Length"), &announced) && announced > limit;
    std::string body;
    reader([&](const char* data, size_t length) {
      if (too_large || body.size() + length > limit) {
        too_large = true;
        return false;  // stop reading; the connection is closed after the answer
      }
      body.append(data, length);
      return true;
    });
    AdmissionAnswer out;
    if (too_large) {
      out = {413,
             nlohmann::json{{"error", absl::StrCat("the body is longer than ", limit, " bytes")}}
                 .dump()};
      reviewer_->Count("too_large");
    } else {
      out = reviewer_->Review(body);
    }
    res.status = out.status;
    res.set_content(out.body, "application/json");
  });
  auto seconds = [](absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Seconds(d)); };
  routes.set_read_timeout(seconds(options_.read_timeout), 0);
  routes.set_write_timeout(seconds(options_.write_timeout), 0);
  routes.set_keep_alive_timeout(seconds(options_.idle_timeout));
  return server_->Start(options_.listen_address, options_.port);
}

void AdmissionWebhookServer::Stop() {
  if (server_) server_->Stop();
}

}  // namespace reverser::materializer
