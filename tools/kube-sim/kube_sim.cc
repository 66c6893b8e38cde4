#include "tools/kube-sim/kube_sim.h"

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "tools/kube-sim/managed_fields.h"
#include "tools/kube-sim/object_rules.h"
#include "tools/kube-sim/patch.h"
#include "tools/kube-sim/protobuf.h"
#include "tools/kube-sim/request_info.h"
#include "tools/kube-sim/selectors.h"
#include "tools/kube-sim/yaml_json.h"

extern "C" {
extern const char kube_sim_openapi_core_v1[];
extern const char kube_sim_openapi_core_v1_end[];
extern const char kube_sim_openapi_apps_v1[];
extern const char kube_sim_openapi_apps_v1_end[];
}

namespace reverser::kubesim {
namespace {

using Params = std::multimap<std::string, std::string>;

// What a handler produces; turned into the HTTP response and the audit event.
struct Reply {
  int code = 200;
  Json object;      // JSON body (ignored when `raw` is set)
  std::string raw;  // pre-rendered body
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<ApiError> error;

  static Reply Of(int code, Json object) {
    Reply r;
    r.code = code;
    r.object = std::move(object);
    return r;
  }
  static Reply Err(ApiError e) {
    Reply r;
    r.code = e.code;
    r.raw = e.StatusBody();
    if (e.retry_after_seconds > 0) {
      r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_seconds));
    }
    r.error = std::move(e);
    return r;
  }
};

// One API request being served.
struct Ctx {
  const httplib::Request* req = nullptr;
  std::string audit_id;
  absl::Time received;
  UserInfo user;                         // authenticated
  std::optional<UserInfo> impersonated;  // when Impersonate-User was honoured
  RequestInfo info;
  std::shared_ptr<const ResourceType> type;
  Json request_object;  // for audit (level >= Request)
  AuditDecision audit;
  bool dry_run = false;

  const UserInfo& effective_user() const { return impersonated ? *impersonated : user; }
  const Params& params() const { return req->params; }
  std::string Param(const std::string& k) const { return QueryValue(req->params, k).value_or(""); }
  bool Has(const std::string& k) const { return req->params.count(k) > 0; }
  // The path and query exactly as sent (audit's requestURI).
  std::string RequestUri() const {
    if (!req->target.empty()) return req->target;
    // In-process calls (KubeSim::Call) have no raw target: rebuild one.
    std::string uri = req->path;
    std::vector<std::string> parts;
    for (const auto& [k, v] : req->params) {
      parts.push_back(absl::StrCat(httplib::detail::encode_query_param(k), "=",
                                   httplib::detail::encode_query_param(v)));
    }
    if (!parts.empty()) absl::StrAppend(&uri, "?", absl::StrJoin(parts, "&"));
    return uri;
  }
};

// The parser's message for a body that is not JSON.
std::string JsonParseError(const std::string& body) {
  try {
    Json ignored = Json::parse(body);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string MediaType(const std::string& content_type) {
  std::string t(absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';'))));
  return absl::AsciiStrToLower(t);
}

Json StripForList(Json o) {
  o.erase("kind");
  o.erase("apiVersion");
  return o;
}

struct ContinueToken {
  int64_t rv = 0;
  std::string start;
};

std::string EncodeContinue(int64_t rv, const std::string& start) {
  Json j = {{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", start + std::string(1, '\0')}};
  return absl::WebSafeBase64Escape(j.dump());
}

std::optional<ContinueToken> DecodeContinue(const std::string& token) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) return std::nullopt;
  Json j = Json::parse(raw, nullptr, false);
  if (!j.is_object() || j.value("v", "") != "meta.k8s.io/v1" || !j.contains("rv") ||
      !j["rv"].is_number_integer() || !j.contains("start") || !j["start"].is_string()) {
    return std::nullopt;
  }
  ContinueToken t;
  t.rv = j["rv"];
  t.start = j["start"];
  if (!t.start.empty() && t.start.back() == '\0') t.start.pop_back();
  return t;
}

std::string ObjectKeyOf(const Json& o) {
  const Json& m = o["metadata"];
  return absl::StrCat(m.value("namespace", ""), "/", m.value("name", ""));
}

int64_t ParseRv(const std::string& s) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return -1;
  return v;
}

std::string WatchLine(const std::string& type, const Json& object) {
  return absl::StrCat("{\"type\":\"", type, "\",\"object\":", object.dump(), "}\n");
}

}  // namespace

class KubeSim::Impl {
 public:
  explicit Impl(KubeSimOptions options)
      : options_(std::move(options)),
        store_(options_.history_limit),
        policy_(options_.audit_policy.value_or(AuditPolicy::AllAt(AuditLevel::kRequestResponse))) {}

  absl::Status Start();
  void Stop();
  // `as_user`: already authenticated (in-process calls); otherwise the Authorization header.
  void Serve(const httplib::Request& req, httplib::Response& res,
             const UserInfo* as_user = nullptr);
  void ServeRequest(const httplib::Request& req, httplib::Response& res, const UserInfo* as_user);

  KubeSimOptions options_;
  TypeRegistry types_;
  Store store_;
  FaultInjector faults_;
  Authenticator authn_;
  Authorizer authz_;
  AuditPolicy policy_;
  std::unique_ptr<AuditWebhookBackend> audit_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listen_thread_;
  int port_ = 0;
  bool stopped_ = false;
  std::atomic<int> active_watches_{0};
  mutable std::mutex log_mu_;
  std::vector<std::string> log_;
  std::string openapi_core_, openapi_apps_;

 private:
  // Pipeline pieces.
  std::optional<Reply> ServeNonResource(Ctx& ctx);
  std::optional<Reply> ServeAdmin(Ctx& ctx);
  std::optional<ApiError> Impersonate(Ctx& ctx);
  void EmitAudit(Ctx& ctx, const std::string& stage, const Reply* reply);
  void Respond(Ctx& ctx, const Reply& reply, httplib::Response& res);
  void StartWatch(std::shared_ptr<Ctx> ctx, httplib::Response& res);

  // Resource verbs.
  Reply Get(Ctx& ctx);
  Reply List(Ctx& ctx);
  Reply Create(Ctx& ctx);
  Reply Update(Ctx& ctx);
  Reply Patch(Ctx& ctx);
  Reply Delete(Ctx& ctx);
  Reply DeleteCollection(Ctx& ctx);

  // Shared write path: `transform` turns the current object (nullptr: absent) into the desired
  // one; the rest (conflicts, no-ops, managedFields, finalizer completion) happens here.
  using Transform = std::function<ApiOr<Json>(const Json* current)>;
  ApiOr<WriteResult> WriteObject(Ctx& ctx, const std::string& ns, const std::string& name,
                                 const Transform& transform, bool create_if_missing,
                                 const std::string& operation, const Json& applied);
  ApiOr<WriteResult> DeleteObject(Ctx& ctx, const ResourceType& type, const std::string& ns,
                                  const std::string& name, const Json& options);
  void AfterWrite(Ctx& ctx, const ResourceType& type, const WriteResult& r);
  std::optional<ApiError> ParseBody(Ctx& ctx, Json& out, bool allow_yaml_apply);
  std::string FieldManager(const Ctx& ctx) const;
  Json ToScale(const ResourceType& type, const Json& object) const;
  ApiOr<Json> FromScale(const ResourceType& type, const Json& current, const Json& scale) const;
  std::optional<ApiError> ValidateListOptions(const Ctx& ctx, bool watch) const;
  void RemoveCrdTypes(Ctx& ctx, const Json& crd);
  // The garbage collector's share: dependents whose only owner was `owner` are deleted through
  // ordinary DELETE requests by the GC's service account (so they are audited as in a cluster).
  void CollectGarbage(const Json& owner, const Json& options);
  std::string OpenApiHash(const std::string& gv);
  std::string OpenApiDoc(const std::string& gv);
  bool ServesOpenApiV2() const {
    return options_.openapi_v2.value_or(options_.profile == Profile::kLegacy);
  }
};

// ---------------------------------------------------------------------------------------------
// Lifecycle

absl::Status KubeSim::Impl::Start() {
  openapi_core_.assign(kube_sim_openapi_core_v1, kube_sim_openapi_core_v1_end);
  openapi_apps_.assign(kube_sim_openapi_apps_v1, kube_sim_openapi_apps_v1_end);
  if (!options_.tls_cert_file.empty()) {
    server_ = std::make_unique<httplib::SSLServer>(options_.tls_cert_file.c_str(),
                                                   options_.tls_key_file.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) return absl::InvalidArgumentError("cannot set up the TLS server");
  int threads = options_.worker_threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.max_request_body_bytes);
  server_->set_keep_alive_max_count(1000);
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { Serve(req, res); };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Patch(".*", handler);
  server_->Delete(".*", handler);
  server_->Options(".*", handler);
  // Body-level failures httplib detects itself (413) get a real Status body.
  server_->set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.content_length_ > 0)
          return httplib::Server::HandlerResponse::Unhandled;
        ApiError e = res.status == 413
                         ? RequestEntityTooLarge(options_.max_request_body_bytes)
                         : (res.status == 400 ? BadRequest("bad request") : PathNotFound());
        e.code = res.status;
        res.set_content(e.StatusBody(), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.bind_address.c_str());
    if (port_ <= 0) return absl::UnavailableError("cannot bind a port");
  } else {
    if (!server_->bind_to_port(options_.bind_address.c_str(), options_.port)) {
      return absl::UnavailableError(absl::StrCat("cannot bind port ", options_.port));
    }
    port_ = options_.port;
  }
  // Seed the namespaces every cluster has.
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    httplib::Request req;
    req.method = "POST";
    req.path = "/api/v1/namespaces";
    req.body =
        Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}}.dump();
    req.set_header("Content-Type", "application/json");
    req.set_header("User-Agent", "kube-apiserver");
    httplib::Response res;
    Serve(req, res);
  }
  {
    std::lock_guard lock(log_mu_);
    log_.clear();
  }
  // After seeding, so the audit stream starts with the first client request.
  if (options_.audit_webhook) {
    audit_ = std::make_unique<AuditWebhookBackend>(*options_.audit_webhook);
  }
  listen_thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib 0.11 has no wait_until_ready(): poll for the accept loop with a deadline.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!server_->is_running() && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server_->is_running()) return absl::UnavailableError("server did not start");
  return absl::OkStatus();
}

void KubeSim::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  store_.Shutdown();  // open watches end their streams
  server_->stop();
  if (listen_thread_.joinable()) listen_thread_.join();
  audit_.reset();  // flushes
}

// ---------------------------------------------------------------------------------------------
// Request pipeline

void KubeSim::Impl::Serve(const httplib::Request& req, httplib::Response& res,
                          const UserInfo* as_user) {
  // Input that slips past validation must never take the server down: a JSON type error deep
  // in a handler becomes a 500 Status and the server keeps serving.
  try {
    ServeRequest(req, res, as_user);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong JSON type: the apiserver's decoder rejects these with 400.
    ApiError err = BadRequest(absl::StrCat("unable to decode the request body: ", e.what()));
    res.status = err.code;
    res.set_content(err.StatusBody(), "application/json");
  } catch (const std::exception& e) {
    ApiError err = InternalError(e.what());
    res.status = err.code;
    res.set_content(err.StatusBody(), "application/json");
  }
}

void KubeSim::Impl::ServeRequest(const httplib::Request& req, httplib::Response& res,
                                 const UserInfo* as_user) {
  auto ctx = std::make_shared<Ctx>();
  ctx->req = &req;
  ctx->received = absl::Now();
  ctx->audit_id = NewUid();
  {
    std::lock_guard lock(log_mu_);
    log_.push_back(absl::StrCat(req.method, " ", ctx->RequestUri()));
  }
  res.set_header("Audit-Id", ctx->audit_id);
  res.set_header("Cache-Control", "no-cache, private");
  res.set_header("X-Kubernetes-Pf-Flowschema-Uid", "kube-sim");

  if (absl::StartsWith(req.path, "/_sim/")) {
    if (auto reply = ServeAdmin(*ctx)) return Respond(*ctx, *reply, res);
  }
  if (as_user) {
    ctx->user = *as_user;
  } else {
    ApiOr<UserInfo> user = authn_.Authenticate(req.get_header_value("Authorization"));
    if (!user.ok()) return Respond(*ctx, Reply::Err(user.error()), res);
    ctx->user = *user;
  }
  if (auto err = Impersonate(*ctx)) return Respond(*ctx, Reply::Err(*err), res);

  ctx->info = ParseRequestInfo(req.method, req.path, req.params);
  const RequestInfo& info = ctx->info;
  ctx->dry_run = ctx->Param("dryRun") == "All";

  if (auto fault = faults_.Match(info.verb, info.resource, req.path)) {
    switch (fault->action) {
      case FaultRule::Action::kTooManyRequests: {
        // API Priority and Fairness rejects in plain text, not a Status.
        Reply r;
        r.code = 429;
        r.raw = "Too many requests, please try again later.\n";
        r.content_type = "text/plain; charset=utf-8";
        r.headers = {{"Retry-After", std::to_string(fault->retry_after_seconds)},
                     {"X-Content-Type-Options", "nosniff"}};
        return Respond(*ctx, r, res);
      }
      case FaultRule::Action::kServiceUnavailable:
        return Respond(
            *ctx, Reply::Err(ServiceUnavailable(fault->message, fault->retry_after_seconds)), res);
      case FaultRule::Action::kInternalError:
        return Respond(*ctx, Reply::Err(InternalError(fault->message)), res);
      case FaultRule::Action::kDelay:
        std::this_thread::sleep_for(absl::ToChronoMilliseconds(fault->delay));
        break;
    }
  }

  if (!info.is_resource) {
    if (auto reply = ServeNonResource(*ctx)) return Respond(*ctx, *reply, res);
    return Respond(*ctx, Reply::Err(PathNotFound()), res);
  }
  ctx->type = types_.Find(info.group, info.version, info.resource);
  if (!ctx->type || (!ctx->type->namespaced && !info.namespace_.empty())) {
    return Respond(*ctx, Reply::Err(PathNotFound()), res);
  }
  const ResourceType& type = *ctx->type;
  if (!info.subresource.empty() && !type.FindSubresource(info.subresource)) {
    return Respond(*ctx, Reply::Err(PathNotFound()), res);
  }

  // Authorization.
  AuthzAttributes attrs{info.verb,        info.group,      info.resource,
                        info.subresource, info.namespace_, info.name};
  ctx->audit = policy_.Evaluate({ctx->effective_user().username, ctx->effective_user().groups,
                                 info.verb, true, info.group, info.resource, info.subresource,
                                 info.namespace_, info.name, req.path});
  if (!authz_.Allowed(ctx->effective_user(), attrs)) {
    return Respond(*ctx,
                   Reply::Err(Forbidden(type.Subject(), info.name,
                                        Authorizer::DenyReason(ctx->effective_user(), attrs))),
                   res);
  }
  EmitAudit(*ctx, "RequestReceived", nullptr);

  if (info.verb == "watch") {
    if (!type.HasVerb("watch"))
      return Respond(*ctx, Reply::Err(MethodNotSupported(type.Subject(), "watch")), res);
    return StartWatch(ctx, res);
  }
  Reply reply;
  if (info.verb == "get") {
    reply = Get(*ctx);
  } else if (info.verb == "list") {
    reply = List(*ctx);
  } else if (info.verb == "create") {
    reply =
        info.name.empty() ? Create(*ctx) : Reply::Err(MethodNotSupported(type.Subject(), "create"));
  } else if (info.verb == "update") {
    reply = Update(*ctx);
  } else if (info.verb == "patch") {
    reply = Patch(*ctx);
  } else if (info.verb == "delete") {
    reply = Delete(*ctx);
  } else if (info.verb == "deletecollection") {
    reply = type.HasVerb("deletecollection")
                ? DeleteCollection(*ctx)
                : Reply::Err(MethodNotSupported(type.Subject(), "deletecollection"));
  } else {
    reply = Reply::Err(MethodNotSupported(type.Subject(), info.verb));
  }
  Respond(*ctx, reply, res);
}

void KubeSim::Impl::Respond(Ctx& ctx, const Reply& reply, httplib::Response& res) {
  res.status = reply.code;
  for (const auto& [k, v] : reply.headers) res.set_header(k, v);
  if (reply.code != 304) {  // a 304 has no body
    std::string body =
        !reply.raw.empty() ? reply.raw : (reply.object.is_null() ? "" : reply.object.dump());
    res.set_content(body, reply.content_type);
  }
  if (ctx.info.is_resource) EmitAudit(ctx, "ResponseComplete", &reply);
}

std::optional<ApiError> KubeSim::Impl::Impersonate(Ctx& ctx) {
  const auto& req = *ctx.req;
  std::string as_user = req.get_header_value("Impersonate-User");
  if (as_user.empty()) {
    if (req.has_header("Impersonate-Group")) {
      return BadRequest("requested [{Group   " + req.get_header_value("Impersonate-Group") +
                        "  }] without impersonating a user");
    }
    return std::nullopt;
  }
  UserInfo target{as_user, req.get_header_value("Impersonate-Uid"), {}, {}};
  size_t n = req.get_header_value_count("Impersonate-Group");
  for (size_t i = 0; i < n; ++i)
    target.groups.push_back(req.get_header_value("Impersonate-Group", i));
  for (const auto& [k, v] : req.headers) {
    if (absl::StartsWithIgnoreCase(k, "Impersonate-Extra-")) {
      target.extra[absl::AsciiStrToLower(k.substr(18))].push_back(v);
    }
  }
  AuthzAttributes users{"impersonate", "", "users", "", "", as_user};
  if (!authz_.Allowed(ctx.user, users)) {
    return Forbidden(ErrorSubject{"", "users", "User"}, as_user,
                     Authorizer::DenyReason(ctx.user, users));
  }
  for (const auto& g : target.groups) {
    AuthzAttributes groups{"impersonate", "", "groups", "", "", g};
    if (!authz_.Allowed(ctx.user, groups)) {
      return Forbidden(ErrorSubject{"", "groups", "Group"}, g,
                       Authorizer::DenyReason(ctx.user, groups));
    }
  }
  if (std::find(target.groups.begin(), target.groups.end(), "system:authenticated") ==
      target.groups.end()) {
    target.groups.push_back("system:authenticated");
  }
  ctx.impersonated = target;
  return std::nullopt;
}

void KubeSim::Impl::EmitAudit(Ctx& ctx, const std::string& stage, const Reply* reply) {
  if (!audit_ || !ctx.info.is_resource || ctx.audit.level == AuditLevel::kNone) return;
  const auto& omit = ctx.audit.omit_stages;
  if (std::find(omit.begin(), omit.end(), stage) != omit.end()) return;
  const RequestInfo& info = ctx.info;
  Json e = {{"level", AuditLevelName(ctx.audit.level)},
            {"auditID", ctx.audit_id},
            {"stage", stage},
            {"requestURI", ctx.RequestUri()},
            {"verb", info.verb},
            {"user", ctx.user.ToJson()},
            {"sourceIPs", {ctx.req->remote_addr.empty() ? "127.0.0.1" : ctx.req->remote_addr}},
            {"userAgent", ctx.req->get_header_value("User-Agent").substr(0, 1024)},
            {"requestReceivedTimestamp", Rfc3339Micro(ctx.received)},
            {"stageTimestamp", Rfc3339Micro(absl::Now())},
            {"annotations",
             {{"authorization.k8s.io/decision", reply && reply->code == 403 ? "forbid" : "allow"},
              {"authorization.k8s.io/reason", ""}}}};
  if (ctx.impersonated) e["impersonatedUser"] = ctx.impersonated->ToJson();
  Json ref = {{"resource", info.resource}, {"apiVersion", info.version}};
  if (!info.group.empty()) ref["apiGroup"] = info.group;
  if (!info.namespace_.empty()) ref["namespace"] = info.namespace_;
  std::string name = info.name;
  if (name.empty() && ctx.request_object.is_object() && info.verb == "create") {
    name = ctx.request_object.value("metadata", Json::object()).value("name", "");
  }
  if (!name.empty()) ref["name"] = name;
  if (!info.subresource.empty()) ref["subresource"] = info.subresource;
  if (ctx.request_object.is_object() && ctx.request_object.contains("metadata") &&
      ctx.request_object["metadata"].is_object()) {
    const Json& m = ctx.request_object["metadata"];
    if (m.contains("resourceVersion") && m["resourceVersion"].is_string() &&
        !m["resourceVersion"].get<std::string>().empty()) {
      ref["resourceVersion"] = m["resourceVersion"];
    }
    if (m.contains("uid") && m["uid"].is_string()) ref["uid"] = m["uid"];
  }
  e["objectRef"] = ref;
  auto strip = [&](Json o) {
    if (ctx.audit.omit_managed_fields && o.is_object() && o.contains("metadata") &&
        o["metadata"].is_object()) {
      o["metadata"].erase("managedFields");
    }
    return o;
  };
  if (ctx.audit.level >= AuditLevel::kRequest && !ctx.request_object.is_null()) {
    e["requestObject"] = strip(ctx.request_object);
  }
  if (reply) {
    Json status = {{"metadata", Json::object()}, {"code", reply->code}};
    if (!reply->error && reply->object.is_object() && reply->object.value("kind", "") == "Status") {
      for (const char* k : {"status", "message", "reason", "details"}) {
        if (reply->object.contains(k)) status[k] = reply->object[k];
      }
    }
    if (reply->error) {
      Json s = reply->error->ToStatus();
      for (const char* k : {"status", "message", "reason", "details"}) {
        if (s.contains(k)) status[k] = s[k];
      }
    }
    e["responseStatus"] = status;
    if (ctx.audit.level == AuditLevel::kRequestResponse) {
      if (reply->error) {
        e["responseObject"] = reply->error->ToStatus();
      } else if (!reply->object.is_null()) {
        e["responseObject"] = strip(reply->object);
      }
    }
  } else if (stage == "ResponseStarted") {
    e["responseStatus"] = {{"metadata", Json::object()}, {"code", 200}};
  }
  audit_->Process(std::move(e));
}

// ---------------------------------------------------------------------------------------------
// Non-resource endpoints: version, discovery, OpenAPI, health, admin.

std::string KubeSim::Impl::OpenApiDoc(const std::string& gv) {
  if (gv == "api/v1") return openapi_core_;
  if (gv == "apis/apps/v1") return openapi_apps_;
  std::vector<std::string> p = absl::StrSplit(gv, '/');
  if (p.size() == 3 && p[0] == "apis" && types_.HasGroupVersion(p[1], p[2])) {
    return MinimalOpenApiV3(types_, p[1], p[2]).dump();
  }
  return "";
}

std::string KubeSim::Impl::OpenApiHash(const std::string& gv) { return Sha512Hex(OpenApiDoc(gv)); }

std::optional<Reply> KubeSim::Impl::ServeNonResource(Ctx& ctx) {
  const auto& req = *ctx.req;
  const std::string& path = req.path;
  if (req.method != "GET" && req.method != "HEAD") return std::nullopt;
  bool modern = options_.profile == Profile::kModern;
  if (path == "/version" || path == "/version/") {
    std::string minor = modern ? "34" : "33";
    return Reply::Of(200, {{"major", "1"},
                           {"minor", minor},
                           {"gitVersion", absl::StrCat("v1.", minor, ".0")},
                           {"gitCommit", "0000000000000000000000000000000000000000"},
                           {"gitTreeState", "clean"},
                           {"buildDate", "2026-01-01T00:00:00Z"},
                           {"goVersion", "go1.24.0"},
                           {"compiler", "gc"},
                           {"platform", "linux/amd64"}});
  }
  if (path == "/healthz" || path == "/readyz" || path == "/livez") {
    Reply r;
    r.raw = "ok";
    r.content_type = "text/plain; charset=utf-8";
    return r;
  }
  std::string aggregated_version = NegotiateAggregatedDiscovery(
      req.get_header_value("Accept"), /*allow_v2beta1=*/options_.profile == Profile::kLegacy);
  auto aggregated = [&](bool core) -> Reply {
    Reply r;
    r.raw = AggregatedDiscovery(types_, core, options_.profile, aggregated_version).dump();
    r.content_type = AggregatedContentType(aggregated_version);
    std::string etag = absl::StrCat("\"", Sha512Hex(r.raw), "\"");
    r.headers = {{"ETag", etag}, {"Vary", "Accept"}, {"Cache-Control", "public"}};
    if (req.get_header_value("If-None-Match") == etag) {
      r.code = 304;
      r.raw.clear();
    }
    return r;
  };
  bool wants_v2 = !aggregated_version.empty();
  if (path == "/api" || path == "/api/") {
    if (wants_v2) return aggregated(true);
    return Reply::Of(200, LegacyApiVersions(absl::StrCat(options_.bind_address, ":", port_)));
  }
  if (path == "/apis" || path == "/apis/") {
    if (wants_v2) return aggregated(false);
    return Reply::Of(200, LegacyGroupList(types_));
  }
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (parts.size() == 2 && parts[0] == "api") {
    Json list = LegacyResourceList(types_, "", parts[1]);
    if (!list.is_null()) return Reply::Of(200, list);
  }
  if (parts.size() == 2 && parts[0] == "apis") {
    Json group = LegacyGroup(types_, parts[1]);
    if (!group.is_null()) return Reply::Of(200, group);
  }
  if (parts.size() == 3 && parts[0] == "apis") {
    Json list = LegacyResourceList(types_, parts[1], parts[2]);
    if (!list.is_null()) return Reply::Of(200, list);
  }
  if (path == "/openapi/v3" || path == "/openapi/v3/") {
    Json paths = Json::object();
    paths["api/v1"] = {{"serverRelativeURL", "/openapi/v3/api/v1?hash=" + OpenApiHash("api/v1")}};
    for (const auto& [g, versions] : types_.Groups()) {
      for (const auto& v : versions) {
        std::string gv = absl::StrCat("apis/", g, "/", v);
        paths[gv] = {
            {"serverRelativeURL", absl::StrCat("/openapi/v3/", gv, "?hash=", OpenApiHash(gv))}};
      }
    }
    return Reply::Of(200, {{"paths", paths}});
  }
  if (absl::StartsWith(path, "/openapi/v3/")) {
    std::string doc = OpenApiDoc(path.substr(strlen("/openapi/v3/")));
    if (doc.empty()) return std::nullopt;
    Reply r;
    r.raw = std::move(doc);
    r.headers = {{"Etag", absl::StrCat("\"", Sha512Hex(r.raw), "\"")}};
    if (ctx.Has("hash")) {
      r.headers.emplace_back("Cache-Control", "public, immutable");
      r.headers.emplace_back("Expires", "Thu, 01 Jan 2099 00:00:00 GMT");
    }
    return r;
  }
  if (path == "/openapi/v2" && ServesOpenApiV2()) {
    // A minimal gnostic openapi_v2.Document in protobuf: swagger "2.0", info, empty paths and
    // definitions. kubectl <= 1.27 needs /openapi/v2 for `apply` validation; with no
    // definitions it skips client-side schema checks.
    static const std::string kDoc = [] {
      std::string info = std::string("\x0a\x0aKubernetes\x12\x07v1.33.0", 21);
      std::string doc = std::string(
          "\x0a\x03"
          "2.0",
          5);
      doc += '\x12';
      doc += static_cast<char>(info.size());
      doc += info;
      doc += std::string("\x42\x00\x4a\x00", 4);
      return doc;
    }();
    Reply r;
    r.raw = kDoc;
    r.content_type = "application/octet-stream";  // as kube-openapi serves protobuf
    return r;
  }
  return std::nullopt;  // 404, like a server with OpenAPI v2 turned off
}

std::optional<Reply> KubeSim::Impl::ServeAdmin(Ctx& ctx) {
  if (!options_.admin_endpoints) return std::nullopt;
  const auto& req = *ctx.req;
  Reply ok = Reply::Of(200, {{"ok", true}});
  if (req.path == "/_sim/faults" && req.method == "POST") {
    Json j = Json::parse(req.body, nullptr, false);
    ApiOr<FaultRule> rule = FaultRule::FromJson(j);
    if (!rule.ok()) return Reply::Err(rule.error());
    faults_.Add(*rule);
    return ok;
  }
  if (req.path == "/_sim/faults" && req.method == "DELETE") {
    faults_.Clear();
    return ok;
  }
  if (req.path == "/_sim/compact" && req.method == "POST") {
    store_.Compact();
    return Reply::Of(200, {{"compactedResourceVersion", std::to_string(store_.CompactedRv())}});
  }
  if (req.path == "/_sim/drop-watches" && req.method == "POST") {
    store_.DropWatches();
    return ok;
  }
  if (req.path == "/_sim/state" && req.method == "GET") {
    Json s = {{"resourceVersion", std::to_string(store_.CurrentRv())},
              {"activeWatches", active_watches_.load()},
              {"compactedResourceVersion", std::to_string(store_.CompactedRv())}};
    if (audit_) {
      auto st = audit_->stats();
      s["audit"] = {{"eventsSent", st.events_sent},
                    {"batchesSent", st.batches_sent},
                    {"failedAttempts", st.failed_attempts},
                    {"eventsDropped", st.events_dropped}};
    }
    return Reply::Of(200, s);
  }
  return Reply::Err(PathNotFound());
}

// ---------------------------------------------------------------------------------------------
// Reads

Json KubeSim::Impl::ToScale(const ResourceType& type, const Json& o) const {
  const Json& m = o["metadata"];
  Json meta = {{"name", m.value("name", "")}};
  for (const char* k : {"namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (m.contains(k)) meta[k] = m[k];
  }
  int64_t replicas = 0, status_replicas = 0;
  if (type.custom) {
    Json::json_pointer sp(
        "/" + absl::StrReplaceAll(absl::StripPrefix(type.spec_replicas_path, "."), {{".", "/"}}));
    Json::json_pointer st(
        "/" + absl::StrReplaceAll(absl::StripPrefix(type.status_replicas_path, "."), {{".", "/"}}));
    if (o.contains(sp) && o[sp].is_number_integer()) replicas = o[sp];
    if (o.contains(st) && o[st].is_number_integer()) status_replicas = o[st];
  } else {
    replicas = o.value("spec", Json::object()).value("replicas", 0);
    status_replicas = o.value("status", Json::object()).value("replicas", 0);
  }
  Json status = {{"replicas", status_replicas}};
  const Json& sel = o.value("spec", Json::object()).value("selector", Json::object());
  if (sel.is_object() && sel.contains("matchLabels") && sel["matchLabels"].is_object()) {
    std::vector<std::string> terms;
    for (const auto& [k, v] : sel["matchLabels"].items()) {
      if (v.is_string()) terms.push_back(absl::StrCat(k, "=", v.get<std::string>()));
    }
    status["selector"] = absl::StrJoin(terms, ",");
  }
  return {{"kind", "Scale"},
          {"apiVersion", "autoscaling/v1"},
          {"metadata", meta},
          {"spec", {{"replicas", replicas}}},
          {"status", status}};
}

ApiOr<Json> KubeSim::Impl::FromScale(const ResourceType& type, const Json& current,
                                     const Json& scale) const {
  if (!scale.is_object() || !scale.contains("spec") || !scale["spec"].is_object()) {
    return BadRequest("scale object has no spec");
  }
  Json replicas = scale["spec"].value("replicas", Json(0));
  if (!replicas.is_number_integer() || replicas.get<int64_t>() < 0) {
    return Invalid(ErrorSubject{"autoscaling", "scales", "Scale"},
                   current["metadata"].value("name", ""),
                   {FieldInvalid("spec.replicas", replicas, "must be greater than or equal to 0")});
  }
  Json next = current;
  if (type.custom) {
    Json::json_pointer sp(
        "/" + absl::StrReplaceAll(absl::StripPrefix(type.spec_replicas_path, "."), {{".", "/"}}));
    next[sp] = replicas;
  } else {
    next["spec"]["replicas"] = replicas;
  }
  const Json& rv = scale.value("metadata", Json::object()).value("resourceVersion", Json(""));
  if (rv.is_string() && !rv.get<std::string>().empty()) next["metadata"]["resourceVersion"] = rv;
  return next;
}

Reply KubeSim::Impl::Get(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  std::optional<Json> o = store_.Get(type.Key(), ctx.info.namespace_, ctx.info.name);
  if (!o) return Reply::Err(NotFound(type.Subject(), ctx.info.name));
  if (ctx.info.subresource == "scale") return Reply::Of(200, ToScale(type, *o));
  return Reply::Of(200, *o);
}

std::optional<ApiError> KubeSim::Impl::ValidateListOptions(const Ctx& ctx, bool watch) const {
  std::string rv = ctx.Param("resourceVersion");
  bool has_match = ctx.Has("resourceVersionMatch");
  std::string match = ctx.Param("resourceVersionMatch");
  bool has_sie = ctx.Has("sendInitialEvents");
  std::vector<StatusCause> causes;
  if (!watch) {
    if (has_sie) {
      causes.push_back(
          FieldForbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
    if (has_match) {
      if (rv.empty()) {
        causes.push_back(
            FieldForbidden("resourceVersionMatch",
                           "resourceVersionMatch is forbidden unless resourceVersion is provided"));
      }
      if (!ctx.Param("continue").empty()) {
        causes.push_back(FieldForbidden(
            "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
      }
      if (match != "Exact" && match != "NotOlderThan") {
        causes.push_back(
            FieldNotSupported("resourceVersionMatch", match, {"Exact", "NotOlderThan"}));
      } else if (match == "Exact" && rv == "0") {
        causes.push_back(FieldForbidden(
            "resourceVersionMatch",
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
      }
    }
  } else if (options_.profile == Profile::kLegacy) {
    if (has_sie) {
      causes.push_back(FieldForbidden(
          "sendInitialEvents",
          "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"));
    } else if (has_match) {
      causes.push_back(FieldForbidden(
          "resourceVersionMatch",
          "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
    }
  } else {
    if (has_sie) {
      if (match != "NotOlderThan") {
        causes.push_back(FieldForbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
      }
    } else if (has_match) {
      causes.push_back(FieldForbidden(
          "resourceVersionMatch",
          "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
    }
  }
  if (!causes.empty()) return InvalidListOptions(causes);
  return std::nullopt;
}

Reply KubeSim::Impl::List(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  if (auto err = ValidateListOptions(ctx, false)) return Reply::Err(*err);
  ApiOr<Selector> labels = Selector::ParseLabels(ctx.Param("labelSelector"));
  if (!labels.ok()) return Reply::Err(labels.error());
  ApiOr<Selector> fields = Selector::ParseFields(ctx.Param("fieldSelector"));
  if (!fields.ok()) return Reply::Err(fields.error());
  std::string rv = ctx.Param("resourceVersion");
  std::string match = ctx.Param("resourceVersionMatch");
  std::optional<int64_t> at;
  std::string start;
  if (std::string cont = ctx.Param("continue"); !cont.empty()) {
    std::optional<ContinueToken> token = DecodeContinue(cont);
    if (!token) return Reply::Err(BadRequest("continue key is not valid: illegal base64 data"));
    if (token->rv < store_.CompactedRv() || token->rv < 0) {
      ApiError e = Gone(
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter, or use the continue token in "
          "this response to retrieve the remainder of the results. Continuing with the provided "
          "token results in an inconsistent list - objects that were created, modified, or "
          "deleted between the time the first chunk was returned and now may show up in the "
          "list.");
      Reply r = Reply::Err(e);
      nlohmann::ordered_json body = e.ToOrderedStatus();
      body["metadata"]["continue"] = EncodeContinue(-1, token->start);
      r.raw = body.dump();
      return r;
    }
    at = token->rv;
    start = token->start;
  } else if (!rv.empty() && rv != "0") {
    int64_t n = ParseRv(rv);
    if (n < 0) return Reply::Err(BadRequest(absl::StrCat("invalid resource version: ", rv)));
    if (n > store_.CurrentRv() && !store_.WaitForRv(n, absl::Now() + options_.too_large_rv_wait)) {
      return Reply::Err(TooLargeResourceVersion(n, store_.CurrentRv()));
    }
    if (match == "Exact") at = n;
  }
  ApiOr<Store::Snapshot> snap = store_.List(type.Key(), ctx.info.namespace_, at);
  if (!snap.ok()) return Reply::Err(snap.error());
  int64_t limit = 0;
  if (ctx.Has("limit") && !absl::SimpleAtoi(ctx.Param("limit"), &limit)) limit = 0;
  Json items = Json::array();
  std::string last_key;
  int64_t remaining = 0;
  for (const auto& o : snap->items) {
    if (!start.empty() && ObjectKeyOf(o) < start) continue;
    if (!labels->Matches(o) || !fields->Matches(o)) continue;
    if (limit > 0 && static_cast<int64_t>(items.size()) >= limit) {
      ++remaining;
      continue;
    }
    last_key = ObjectKeyOf(o);
    items.push_back(StripForList(o));
  }
  Json meta = {{"resourceVersion", std::to_string(snap->rv)}};
  if (remaining > 0) {
    meta["continue"] = EncodeContinue(snap->rv, last_key + std::string(1, '\x01'));
    // A label/field selector makes the count unknowable cheaply; real servers omit it then.
    if (labels->empty() && fields->empty()) meta["remainingItemCount"] = remaining;
  }
  return Reply::Of(200, {{"kind", type.kind + "List"},
                         {"apiVersion", type.ApiVersion()},
                         {"metadata", meta},
                         {"items", items}});
}

// ---------------------------------------------------------------------------------------------
// Watch

void KubeSim::Impl::StartWatch(std::shared_ptr<Ctx> ctx, httplib::Response& res) {
  const ResourceType& type = *ctx->type;
  auto fail = [&](const ApiError& e) { Respond(*ctx, Reply::Err(e), res); };
  if (auto err = ValidateListOptions(*ctx, true)) return fail(*err);
  ApiOr<Selector> labels = Selector::ParseLabels(ctx->Param("labelSelector"));
  if (!labels.ok()) return fail(labels.error());
  ApiOr<Selector> fields = Selector::ParseFields(ctx->Param("fieldSelector"));
  if (!fields.ok()) return fail(fields.error());
  if (!ctx->info.name.empty()) {
    // GET .../{name}?watch=true: a watch on one object.
    fields = Selector::ParseFields("metadata.name=" + ctx->info.name);
  }
  std::string rv = ctx->Param("resourceVersion");
  bool bookmarks = QueryBool(ctx->params(), "allowWatchBookmarks");
  bool send_initial;
  if (ctx->Has("sendInitialEvents")) {
    send_initial = QueryBool(ctx->params(), "sendInitialEvents");
  } else {
    // Unset/"0" RV: initial ADDEDs. Modern servers default this to a WatchList request, so the
    // end bookmark follows when bookmarks were asked for.
    send_initial = rv.empty() || rv == "0";
  }
  bool watch_list = send_initial && options_.profile == Profile::kModern &&
                    (ctx->Has("sendInitialEvents") || rv.empty() || rv == "0");
  int64_t timeout_s = 0;
  absl::Duration timeout = options_.default_watch_timeout;
  if (ctx->Has("timeoutSeconds") && absl::SimpleAtoi(ctx->Param("timeoutSeconds"), &timeout_s) &&
      timeout_s > 0) {
    timeout = absl::Seconds(timeout_s);
  }

  struct WatchState {
    std::vector<std::string> pending;  // initial lines
    int64_t cursor = 0;
    absl::Time deadline;
    absl::Time next_bookmark;
    uint64_t epoch = 0;
    bool started = false;
    bool finished = false;
  };
  auto state = std::make_shared<WatchState>();
  state->deadline = absl::Now() + timeout;
  state->next_bookmark = absl::Now() + options_.bookmark_interval;
  state->epoch = store_.epoch();
  bool legacy = options_.profile == Profile::kLegacy;
  auto bookmark = [&type, legacy](int64_t at, bool initial_end) {
    Json meta = {{"resourceVersion", std::to_string(at)}};
    if (legacy) meta["creationTimestamp"] = nullptr;
    if (initial_end) meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    return WatchLine("BOOKMARK",
                     {{"kind", type.kind}, {"apiVersion", type.ApiVersion()}, {"metadata", meta}});
  };
  auto error_line = [](const ApiError& e) {
    return absl::StrCat("{\"type\":\"ERROR\",\"object\":", e.StatusBody(), "}\n");
  };

  if (send_initial) {
    ApiOr<Store::Snapshot> snap = store_.List(type.Key(), ctx->info.namespace_);
    if (!snap.ok()) return fail(snap.error());
    int64_t want = rv.empty() || rv == "0" ? 0 : ParseRv(rv);
    if (want > snap->rv) {
      if (!store_.WaitForRv(want, absl::Now() + options_.too_large_rv_wait)) {
        return fail(TooLargeResourceVersion(want, store_.CurrentRv()));
      }
      snap = store_.List(type.Key(), ctx->info.namespace_);
      if (!snap.ok()) return fail(snap.error());
    }
    for (const auto& o : snap->items) {
      if (labels->Matches(o) && fields->Matches(o)) state->pending.push_back(WatchLine("ADDED", o));
    }
    state->cursor = snap->rv;
    if (watch_list && bookmarks) state->pending.push_back(bookmark(snap->rv, true));
  } else {
    int64_t n = ParseRv(rv);
    if (n < 0) return fail(BadRequest(absl::StrCat("invalid resource version: ", rv)));
    if (n < store_.CompactedRv()) {
      // Too old: HTTP 200 with a single ERROR event, then the stream ends.
      state->pending.push_back(error_line(
          Gone(absl::StrCat("too old resource version: ", n, " (", store_.CompactedRv(), ")"))));
      state->finished = true;
    } else if (n > store_.CurrentRv() &&
               !store_.WaitForRv(n, absl::Now() + options_.too_large_rv_wait)) {
      state->pending.push_back(error_line(TooLargeResourceVersion(n, store_.CurrentRv())));
      state->finished = true;
    }
    state->cursor = n;
  }

  EmitAudit(*ctx, "ResponseStarted", nullptr);
  res.status = 200;
  // httplib gzips chunked application/json when the client accepts gzip (Go always does), and
  // its compressor holds data back, so events would not reach the client as they happen. Real
  // watches are not compressed: drop the header (the Request is a mutable local inside httplib).
  const_cast<httplib::Request*>(ctx->req)->headers.erase("Accept-Encoding");
  std::string type_key = type.Key();
  std::string ns = ctx->info.namespace_;
  Selector label_sel = *labels, field_sel = *fields;
  auto matches = [label_sel, field_sel, ns](const Json* o) {
    if (!o) return false;
    if (!ns.empty() && (*o)["metadata"].value("namespace", "") != ns) return false;
    return label_sel.Matches(*o) && field_sel.Matches(*o);
  };
  absl::Duration bookmark_interval = options_.bookmark_interval;
  // Counts open watch streams; released when httplib drops the provider.
  auto open_watch =
      std::shared_ptr<void>((++active_watches_, nullptr), [this](void*) { --active_watches_; });
  res.set_chunked_content_provider(
      "application/json", [this, ctx, state, type_key, matches, bookmarks, bookmark, error_line,
                           bookmark_interval, open_watch](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& line) { return sink.write(line.data(), line.size()); };
        if (!state->started) {
          state->started = true;
          for (const auto& line : state->pending) {
            if (!write(line)) return false;
          }
          state->pending.clear();
          if (state->finished) {
            sink.done();
            return true;
          }
        }
        absl::Time now = absl::Now();
        if (now >= state->deadline || store_.shutting_down()) {
          sink.done();  // the stream just ends (terminating chunk), as at timeoutSeconds
          Reply done = Reply::Of(200, nullptr);
          EmitAudit(*ctx, "ResponseComplete", &done);
          return true;
        }
        absl::Time wake =
            std::min(state->deadline, bookmarks ? state->next_bookmark : absl::InfiniteFuture());
        Store::WaitResult w = store_.WaitForEvents(type_key, state->cursor, wake, state->epoch);
        if (w.interrupted) {
          if (store_.shutting_down()) return true;  // next call ends the stream cleanly
          return false;                             // DropWatches(): cut the connection mid-stream
        }
        if (w.expired) {
          write(error_line(Gone(absl::StrCat("too old resource version: ", state->cursor, " (",
                                             store_.CompactedRv(), ")"))));
          sink.done();
          return true;
        }
        for (const auto& e : w.events) {
          state->cursor = e.rv;
          bool now_in = e.type != "DELETED" && matches(e.object.get());
          bool was_in = matches(e.prev.get());
          std::string type;
          if (e.type == "DELETED") {
            if (was_in) type = "DELETED";
          } else if (now_in && was_in) {
            type = "MODIFIED";
          } else if (now_in) {
            type = "ADDED";
          } else if (was_in) {
            type = "DELETED";  // no longer matches the selector
          }
          if (type.empty()) continue;
          if (!write(WatchLine(type, *e.object))) return false;
        }
        if (w.events.empty() && w.current_rv > state->cursor) state->cursor = w.current_rv;
        if (bookmarks && absl::Now() >= state->next_bookmark) {
          state->next_bookmark = absl::Now() + bookmark_interval;
          if (!write(bookmark(std::max(state->cursor, w.current_rv), false))) return false;
        }
        return true;
      });
}

// ---------------------------------------------------------------------------------------------
// Writes

std::string KubeSim::Impl::FieldManager(const Ctx& ctx) const {
  std::string m = ctx.Param("fieldManager");
  if (!m.empty()) return m;
  // Default: the User-Agent up to the first '/', as the apiserver does.
  std::string ua = ctx.req->get_header_value("User-Agent");
  return ua.substr(0, ua.find('/'));
}

std::optional<ApiError> KubeSim::Impl::ParseBody(Ctx& ctx, Json& out, bool yaml_ok) {
  std::string media = MediaType(ctx.req->get_header_value("Content-Type"));
  if (media.empty() || media == "application/json" || media == "*/*") {
    out = Json::parse(ctx.req->body, nullptr, false);
    if (out.is_discarded()) {
      return BadRequest(absl::StrCat("json parse error: ", JsonParseError(ctx.req->body)));
    }
    return std::nullopt;
  }
  if (media == "application/yaml" || (yaml_ok && media == "application/apply-patch+yaml")) {
    ApiOr<Json> j = ParseYamlOrJson(ctx.req->body);
    if (!j.ok()) return j.error();
    out = *j;
    return std::nullopt;
  }
  if (media == kProtobufContentType) {
    // kubectl's generator commands (create configmap/secret/namespace/sa/deployment) send
    // protobuf; other kinds get 415 and should be sent as JSON.
    ApiOr<Json> j = DecodeKubernetesProtobuf(ctx.req->body);
    if (!j.ok()) return j.error();
    out = *j;
    return std::nullopt;
  }
  return UnsupportedMediaType(
      "application/json, application/yaml, application/vnd.kubernetes.protobuf");
}

ApiOr<WriteResult> KubeSim::Impl::WriteObject(Ctx& ctx, const std::string& ns,
                                              const std::string& name, const Transform& transform,
                                              bool create_if_missing, const std::string& operation,
                                              const Json& applied) {
  const ResourceType& type = *ctx.type;
  const std::string subresource = ctx.info.subresource == "scale" ? "" : ctx.info.subresource;
  ManagerWrite write{FieldManager(ctx), operation, ctx.info.subresource, type.ApiVersion(),
                     absl::Now()};
  absl::Time now = write.time;
  Mutator mutator = [&](const Json* current) -> ApiOr<WriteDecision> {
    if (!current && !create_if_missing) return NotFound(type.Subject(), name);
    ApiOr<Json> desired = transform(current);
    if (!desired.ok()) return desired.error();
    Json next = std::move(*desired);
    if (auto type_error = CheckFieldTypes(type, next)) return *type_error;
    next["kind"] = type.kind;
    next["apiVersion"] = type.ApiVersion();
    if (!next["metadata"].is_object()) next["metadata"] = Json::object();
    if (!current) {
      next["metadata"]["name"] = name;
      if (type.namespaced) next["metadata"]["namespace"] = ns;
      std::vector<StatusCause> causes = ValidateObject(type, next);
      if (!causes.empty()) return Invalid(type.Subject(), name, causes);
      next = PrepareForCreate(type, std::move(next), now);
      next = UpdateManagedFields(Json(nullptr), next, applied, write);
      return WriteDecision{WriteDecision::Kind::kPut, std::move(next)};
    }
    const Json& meta = next["metadata"];
    std::string want_rv = meta.value("resourceVersion", "");
    if (!want_rv.empty() && want_rv != (*current)["metadata"].value("resourceVersion", "")) {
      return ModifiedConflict(type.Subject(), name);
    }
    if (meta.contains("name") && meta["name"] != name) {
      return BadRequest("the name of the object (" + meta.value("name", "") +
                        ") does not match the name on the URL (" + name + ")");
    }
    next = PrepareForUpdate(type, *current, std::move(next), subresource);
    std::vector<StatusCause> causes = ValidateObject(type, next);
    if (!causes.empty()) return Invalid(type.Subject(), name, causes);
    next["metadata"]["managedFields"] =
        (*current)["metadata"].value("managedFields", Json::array());
    next = UpdateManagedFields(*current, next, applied, write);
    if (SameContent(next, *current)) {
      return WriteDecision{WriteDecision::Kind::kNoChange, *current};
    }
    // Removing the last finalizer of an object being deleted completes the deletion. Like the
    // real registry, the stored state is deleted, so DELETED shows the last stored object
    // (finalizers included) at the deletion's resourceVersion.
    if (next["metadata"].contains("deletionTimestamp") &&
        next["metadata"].value("finalizers", Json::array()).empty()) {
      return WriteDecision{WriteDecision::Kind::kDelete, *current};
    }
    return WriteDecision{WriteDecision::Kind::kPut, std::move(next)};
  };
  ApiOr<WriteResult> r = store_.Write(type.Key(), ns, name, mutator, ctx.dry_run);
  if (r.ok() && !ctx.dry_run) AfterWrite(ctx, type, *r);
  return r;
}

void KubeSim::Impl::AfterWrite(Ctx& ctx, const ResourceType& type, const WriteResult& r) {
  if (type.plural != "customresourcedefinitions" || r.event.empty()) return;
  if (r.event == "DELETED") {
    RemoveCrdTypes(ctx, r.object);
    return;
  }
  ApiOr<std::vector<ResourceType>> crd_types = TypesFromCrd(r.object);
  if (crd_types.ok()) types_.AddCustom(std::move(*crd_types));
}

void KubeSim::Impl::RemoveCrdTypes(Ctx& ctx, const Json& crd) {
  const Json& spec = crd.value("spec", Json::object());
  std::string group = spec.value("group", "");
  std::string plural = spec.value("names", Json::object()).value("plural", "");
  // Custom resources go with their definition.
  for (const auto& t : types_.All()) {
    if (!t->custom || t->group != group || t->plural != plural) continue;
    ApiOr<Store::Snapshot> snap = store_.List(t->Key(), "");
    if (!snap.ok()) continue;
    for (const auto& o : snap->items) {
      const Json& m = o["metadata"];
      store_.Write(
          t->Key(), m.value("namespace", ""), m.value("name", ""),
          [&](const Json* cur) -> ApiOr<WriteDecision> {
            return WriteDecision{WriteDecision::Kind::kDelete, cur ? *cur : Json()};
          },
          false);
    }
    break;
  }
  types_.RemoveCustom(group, plural);
}

void KubeSim::Impl::CollectGarbage(const Json& owner, const Json& options) {
  if (options.value("propagationPolicy", "") == "Orphan") return;
  const Json& meta = owner["metadata"];
  std::string uid = meta.value("uid", "");
  std::string owner_ns = meta.value("namespace", "");
  if (uid.empty()) return;
  static const UserInfo kGarbageCollector{
      "system:serviceaccount:kube-system:generic-garbage-collector",
      NewUid(),
      {"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
      {}};
  for (const auto& t : types_.All()) {
    ApiOr<Store::Snapshot> snap = store_.List(t->Key(), owner_ns);
    if (!snap.ok()) continue;
    for (const auto& o : snap->items) {
      const Json& refs = o["metadata"].value("ownerReferences", Json::array());
      if (!refs.is_array() || refs.empty()) continue;
      bool only_this_owner = std::all_of(refs.begin(), refs.end(), [&](const Json& ref) {
        return ref.is_object() && ref.value("uid", "") == uid;
      });
      if (!only_this_owner) continue;
      const Json& m = o["metadata"];
      std::string path =
          absl::StrCat(t->group.empty() ? "/api/" : "/apis/" + t->group + "/", t->version, "/",
                       t->namespaced ? "namespaces/" + m.value("namespace", "") + "/" : "",
                       t->plural, "/", m.value("name", ""));
      httplib::Request req;
      req.method = "DELETE";
      req.path = path;
      req.target = path;
      req.body =
          Json{{"kind", "DeleteOptions"},
               {"apiVersion", "v1"},
               {"propagationPolicy", "Background"},
               {"preconditions",
                {{"uid", m.value("uid", "")}, {"resourceVersion", m.value("resourceVersion", "")}}}}
              .dump();
      req.set_header("Content-Type", "application/json");
      req.set_header("User-Agent",
                     "kube-controller-manager/v1.34.0 (linux/amd64) kubernetes/kube-sim/"
                     "system:serviceaccount:kube-system:generic-garbage-collector");
      req.remote_addr = "127.0.0.1";
      httplib::Response res;
      Serve(req, res, &kGarbageCollector);
    }
  }
}

Reply KubeSim::Impl::Create(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  Json body;
  if (auto err = ParseBody(ctx, body, false)) return Reply::Err(*err);
  ctx.request_object = body;
  if (!body.is_object()) {
    return Reply::Err(
        BadRequest("Object 'Kind' is missing in '" + ctx.req->body.substr(0, 100) + "'"));
  }
  std::string kind = body.value("kind", "");
  if (!kind.empty() && kind != type.kind) {
    return Reply::Err(
        BadRequest(absl::StrCat(kind, " in version \"", type.version, "\" cannot be handled as a ",
                                type.kind, ": no kind \"", kind, "\" is registered for version \"",
                                type.ApiVersion(), "\" in scheme")));
  }
  if (!body.contains("metadata") || !body["metadata"].is_object())
    body["metadata"] = Json::object();
  Json& meta = body["metadata"];
  std::string ns = ctx.info.namespace_;
  if (type.namespaced) {
    std::string body_ns = meta.value("namespace", "");
    if (!body_ns.empty() && body_ns != ns) {
      return Reply::Err(
          BadRequest("the namespace of the provided object does not match the "
                     "namespace sent on the request"));
    }
    if (!store_.Get("/namespaces", "", ns)) {
      return Reply::Err(NotFound(ErrorSubject{"", "namespaces", "Namespace"}, ns));
    }
  }
  std::string name = meta.value("name", "");
  if (name.empty() && !meta.value("generateName", "").empty()) {
    name = GenerateName(meta.value("generateName", ""));
  }
  if (name.empty()) {
    return Reply::Err(Invalid(
        type.Subject(), "", {FieldRequired("metadata.name", "name or generateName is required")}));
  }
  ApiOr<WriteResult> r = WriteObject(
      ctx, ns, name,
      [&](const Json* current) -> ApiOr<Json> {
        if (current) return AlreadyExists(type.Subject(), name);
        return body;
      },
      true, "Update", Json(nullptr));
  if (!r.ok()) return Reply::Err(r.error());
  return Reply::Of(201, r->object);
}

Reply KubeSim::Impl::Update(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  Json body;
  if (auto err = ParseBody(ctx, body, false)) return Reply::Err(*err);
  ctx.request_object = body;
  if (!body.is_object()) return Reply::Err(BadRequest("the object must be a JSON object"));
  bool scale = ctx.info.subresource == "scale";
  ApiOr<WriteResult> r = WriteObject(
      ctx, ctx.info.namespace_, ctx.info.name,
      [&](const Json* current) -> ApiOr<Json> {
        if (scale) return FromScale(type, *current, body);
        return body;
      },
      false, "Update", Json(nullptr));
  if (!r.ok()) return Reply::Err(r.error());
  if (scale) return Reply::Of(200, ToScale(type, r->object));
  return Reply::Of(200, r->object);
}

Reply KubeSim::Impl::Patch(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  std::string media = MediaType(ctx.req->get_header_value("Content-Type"));
  bool apply = media == "application/apply-patch+yaml";
  bool smp = media == "application/strategic-merge-patch+json";
  if (!(apply || smp || media == "application/merge-patch+json" ||
        media == "application/json-patch+json") ||
      (smp && type.custom)) {
    return Reply::Err(UnsupportedMediaType(
        type.custom ? "application/json-patch+json, application/merge-patch+json, "
                      "application/apply-patch+yaml"
                    : "application/json-patch+json, application/merge-patch+json, "
                      "application/apply-patch+yaml, application/strategic-merge-patch+json"));
  }
  Json patch;
  if (apply) {
    ApiOr<Json> j = ParseYamlOrJson(ctx.req->body);
    if (!j.ok()) return Reply::Err(j.error());
    patch = *j;
    if (ctx.Param("fieldManager").empty()) {
      return Reply::Err(Invalid(ErrorSubject{"meta.k8s.io", "patchoptions", "PatchOptions"}, "",
                                {FieldRequired("fieldManager", "is required for apply patch")}));
    }
  } else {
    patch = Json::parse(ctx.req->body, nullptr, false);
    if (patch.is_discarded()) {
      return Reply::Err(
          BadRequest(absl::StrCat("error decoding patch: ", JsonParseError(ctx.req->body))));
    }
  }
  ctx.request_object = patch;
  bool scale = ctx.info.subresource == "scale";
  auto transform = [&](const Json* current) -> ApiOr<Json> {
    Json base = current ? (scale ? ToScale(type, *current) : *current) : Json::object();
    ApiOr<Json> patched = Json();
    if (apply) {
      if (!patch.is_object()) return BadRequest("apply patch must be an object");
      patched = ApplyStrategicMergePatch(base, patch);
    } else if (smp) {
      patched = ApplyStrategicMergePatch(base, patch);
    } else if (media == "application/merge-patch+json") {
      patched = ApplyMergePatch(base, patch);
    } else {
      patched = ApplyJsonPatch(base, patch);
    }
    if (!patched.ok()) return patched.error();
    if (scale) return FromScale(type, *current, *patched);
    if (current && !apply) {
      // A patch that does not mention resourceVersion must not trip the precondition.
      const Json& pm = patch.is_object() ? patch.value("metadata", Json::object()) : Json::object();
      if (!pm.is_object() || !pm.contains("resourceVersion")) {
        (*patched)["metadata"]["resourceVersion"] = (*current)["metadata"]["resourceVersion"];
      }
    }
    if (apply && current) {
      if (!QueryBool(ctx.params(), "force")) {
        if (auto conflict = ApplyConflicts(*current, patch, FieldManager(ctx))) return *conflict;
      }
      (*patched)["metadata"].erase("resourceVersion");
      *patched = PruneUnapplied(*current, std::move(*patched), FieldManager(ctx), patch);
    }
    return *patched;
  };
  ApiOr<WriteResult> r = WriteObject(ctx, ctx.info.namespace_, ctx.info.name, transform, apply,
                                     apply ? "Apply" : "Update", apply ? patch : Json(nullptr));
  if (!r.ok()) return Reply::Err(r.error());
  if (scale) return Reply::Of(200, ToScale(type, r->object));
  return Reply::Of(apply && r->event == "ADDED" ? 201 : 200, r->object);
}

ApiOr<WriteResult> KubeSim::Impl::DeleteObject(Ctx& ctx, const ResourceType& type,
                                               const std::string& ns, const std::string& name,
                                               const Json& options) {
  absl::Time now = absl::Now();
  Json preconditions = options.value("preconditions", Json::object());
  Mutator mutator = [&](const Json* current) -> ApiOr<WriteDecision> {
    if (!current) return NotFound(type.Subject(), name);
    const Json& meta = (*current)["metadata"];
    if (preconditions.is_object()) {
      for (const char* k : {"uid", "resourceVersion"}) {
        if (preconditions.contains(k) && preconditions[k].is_string() &&
            preconditions[k] != meta.value(k, "")) {
          return Conflict(type.Subject(), name,
                          absl::StrCat("Precondition failed: ",
                                       k == std::string("uid") ? "UID" : "ResourceVersion",
                                       " in precondition: ", preconditions[k].get<std::string>(),
                                       ", ", k == std::string("uid") ? "UID" : "ResourceVersion",
                                       " in object meta: ", meta.value(k, "")));
        }
      }
    }
    Json finalizers = meta.value("finalizers", Json::array());
    if (finalizers.is_array() && !finalizers.empty()) {
      if (meta.contains("deletionTimestamp")) {
        return WriteDecision{WriteDecision::Kind::kNoChange, *current};
      }
      // Finalizers hold the object: mark it and wait for them to be removed.
      Json next = *current;
      next["metadata"]["deletionTimestamp"] = Rfc3339(now);
      next["metadata"]["deletionGracePeriodSeconds"] = 0;
      if (type.tracks_generation) {
        next["metadata"]["generation"] = meta.value("generation", 1) + 1;
      }
      return WriteDecision{WriteDecision::Kind::kPut, std::move(next)};
    }
    return WriteDecision{WriteDecision::Kind::kDelete, *current};
  };
  return store_.Write(type.Key(), ns, name, mutator, ctx.dry_run);
}

Reply KubeSim::Impl::Delete(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  Json options = Json::object();
  if (!ctx.req->body.empty()) {
    options = Json::parse(ctx.req->body, nullptr, false);
    if (options.is_discarded() || !options.is_object()) {
      return Reply::Err(BadRequest("json parse error in DeleteOptions"));
    }
    ctx.request_object = options;
  }
  if (options.value("dryRun", Json::array()).is_array()) {
    for (const auto& d : options.value("dryRun", Json::array())) {
      if (d == "All") ctx.dry_run = true;
    }
  }
  const std::string& name = ctx.info.name;
  if (type.plural == "namespaces" && !ctx.dry_run) {
    // The namespace controller's work, done at once: contents go, then the namespace.
    if (!store_.Get(type.Key(), "", name)) return Reply::Err(NotFound(type.Subject(), name));
    for (const auto& t : types_.All()) {
      if (!t->namespaced) continue;
      ApiOr<Store::Snapshot> snap = store_.List(t->Key(), name);
      if (!snap.ok()) continue;
      for (const auto& o : snap->items) {
        store_.Write(
            t->Key(), name, o["metadata"].value("name", ""),
            [](const Json* cur) -> ApiOr<WriteDecision> {
              return WriteDecision{WriteDecision::Kind::kDelete, cur ? *cur : Json()};
            },
            false);
      }
    }
  }
  ApiOr<WriteResult> r = DeleteObject(ctx, type, ctx.info.namespace_, name, options);
  if (!r.ok()) return Reply::Err(r.error());
  if (!ctx.dry_run) AfterWrite(ctx, type, *r);
  if (r->event != "DELETED") return Reply::Of(202, r->object);  // pending finalizers
  if (!ctx.dry_run) CollectGarbage(r->object, options);
  if (type.custom || type.plural == "pods" || type.plural == "namespaces" ||
      type.plural == "services") {
    return Reply::Of(200, r->object);
  }
  Json details = {{"name", name}, {"kind", type.plural}};
  if (!type.group.empty()) details["group"] = type.group;
  details["uid"] = r->object["metadata"].value("uid", "");
  return Reply::Of(200, {{"kind", "Status"},
                         {"apiVersion", "v1"},
                         {"metadata", Json::object()},
                         {"status", "Success"},
                         {"details", details}});
}

Reply KubeSim::Impl::DeleteCollection(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  Json options = Json::object();
  if (!ctx.req->body.empty()) {
    options = Json::parse(ctx.req->body, nullptr, false);
    if (options.is_discarded() || !options.is_object()) {
      return Reply::Err(BadRequest("json parse error in DeleteOptions"));
    }
    ctx.request_object = options;
  }
  ApiOr<Selector> labels = Selector::ParseLabels(ctx.Param("labelSelector"));
  if (!labels.ok()) return Reply::Err(labels.error());
  ApiOr<Selector> fields = Selector::ParseFields(ctx.Param("fieldSelector"));
  if (!fields.ok()) return Reply::Err(fields.error());
  ApiOr<Store::Snapshot> snap = store_.List(type.Key(), ctx.info.namespace_);
  if (!snap.ok()) return Reply::Err(snap.error());
  Json items = Json::array();
  for (const auto& o : snap->items) {
    if (!labels->Matches(o) || !fields->Matches(o)) continue;
    const Json& m = o["metadata"];
    ApiOr<WriteResult> r =
        DeleteObject(ctx, type, m.value("namespace", ""), m.value("name", ""), options);
    if (!r.ok()) continue;  // raced with another delete
    if (!ctx.dry_run) AfterWrite(ctx, type, *r);
    if (!ctx.dry_run && r->event == "DELETED") CollectGarbage(r->object, options);
    items.push_back(StripForList(r->object));
  }
  return Reply::Of(200, {{"kind", type.kind + "List"},
                         {"apiVersion", type.ApiVersion()},
                         {"metadata", {{"resourceVersion", std::to_string(store_.CurrentRv())}}},
                         {"items", items}});
}

// ---------------------------------------------------------------------------------------------
// Public API

KubeSim::KubeSim(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeSim::~KubeSim() { Stop(); }

absl::StatusOr<std::unique_ptr<KubeSim>> KubeSim::Start(KubeSimOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<KubeSim>(new KubeSim(std::move(impl)));
}

void KubeSim::Stop() { impl_->Stop(); }
int KubeSim::port() const { return impl_->port_; }
std::string KubeSim::url() const {
  bool tls = !impl_->options_.tls_cert_file.empty();
  return absl::StrCat(tls ? "https" : "http", "://", impl_->options_.bind_address, ":",
                      impl_->port_);
}

std::string KubeSim::Kubeconfig(const std::string& token) const {
  bool tls = !impl_->options_.tls_cert_file.empty();
  std::string user = token.empty() ? "{}" : absl::StrCat("\n    token: ", token);
  return absl::StrCat("apiVersion: v1\nkind: Config\nclusters:\n- name: kube-sim\n  cluster:\n",
                      "    server: ", url(), "\n",
                      tls ? "    insecure-skip-tls-verify: true\n" : "",
                      "contexts:\n- name: kube-sim\n  context:\n    cluster: kube-sim\n",
                      "    user: kube-sim\n    namespace: default\ncurrent-context: kube-sim\n",
                      "users:\n- name: kube-sim\n  user: ", user, "\n");
}

absl::Status KubeSim::WriteKubeconfig(const std::string& path, const std::string& token) const {
  std::ofstream out(path);
  out << Kubeconfig(token);
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

FaultInjector& KubeSim::faults() { return impl_->faults_; }
Authenticator& KubeSim::authenticator() { return impl_->authn_; }
Authorizer& KubeSim::authorizer() { return impl_->authz_; }
Store& KubeSim::store() { return impl_->store_; }
TypeRegistry& KubeSim::types() { return impl_->types_; }
void KubeSim::Compact() { impl_->store_.Compact(); }
void KubeSim::DropWatches() { impl_->store_.DropWatches(); }
int64_t KubeSim::CurrentResourceVersion() const { return impl_->store_.CurrentRv(); }
int KubeSim::ActiveWatches() const { return impl_->active_watches_.load(); }

bool KubeSim::WaitForActiveWatches(int n, absl::Duration timeout) const {
  absl::Time deadline = absl::Now() + timeout;
  while (impl_->active_watches_.load() < n) {
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}
AuditWebhookBackend* KubeSim::audit() { return impl_->audit_.get(); }

std::vector<std::string> KubeSim::RequestLog() const {
  std::lock_guard lock(impl_->log_mu_);
  return impl_->log_;
}

KubeSim::Response KubeSim::Call(const std::string& method, const std::string& path_and_query,
                                const std::string& body, const std::string& content_type) {
  httplib::Request req;
  req.method = method;
  req.target = path_and_query;
  size_t q = path_and_query.find('?');
  req.path = path_and_query.substr(0, q);
  if (q != std::string::npos) {
    httplib::detail::parse_query_text(path_and_query.substr(q + 1), req.params);
  }
  req.body = body;
  req.set_header("Content-Type", content_type);
  req.set_header("User-Agent", "kube-sim-test");
  req.remote_addr = "127.0.0.1";
  httplib::Response res;
  static const UserInfo kAdmin{"system:admin", "", {"system:masters", "system:authenticated"}, {}};
  impl_->Serve(req, res, &kAdmin);
  return {res.status, res.body, res.get_header_value("Content-Type")};
}

}  // namespace reverser::kubesim
