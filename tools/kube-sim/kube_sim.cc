#include "tools/kube-sim/kube_sim.h"

#include "tools/kube-sim/server_internal.h"

extern "C" {
extern const char kube_sim_openapi_core_v1[];
extern const char kube_sim_openapi_core_v1_end[];
extern const char kube_sim_openapi_apps_v1[];
extern const char kube_sim_openapi_apps_v1_end[];
}

namespace reverser::kubesim {

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
  // Responses are written in pieces (headers, body, chunks): without TCP_NODELAY, Nagle plus
  // delayed ACKs add ~40 ms to many requests and to every watch event.
  server_->set_tcp_nodelay(true);
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
  webhooks_ = std::make_unique<ValidatingWebhooks>(options_.admission, &webhook_calls_);
  if (options_.async_namespace_controller) {
    namespace_controller_ = std::thread([this] { RunNamespaceController(); });
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
  if (!server_) return;
  {
    std::lock_guard lock(namespace_mu_);
    namespace_controller_stop_ = true;
    namespace_cv_.notify_all();
  }
  if (namespace_controller_.joinable()) namespace_controller_.join();
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

  // A watch that starts with initial events (what a cut-watch fault cuts short); as StartWatch.
  const std::string rv_param = ctx->Param("resourceVersion");
  const bool initial_events =
      info.verb == "watch" && (ctx->Has("sendInitialEvents")
                                   ? QueryBool(ctx->params(), "sendInitialEvents")
                                   : rv_param.empty() || rv_param == "0");
  if (auto fault = faults_.Match(info.verb, info.resource, req.path, initial_events)) {
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
      case FaultRule::Action::kCutWatch:
        ctx->cut_watch_after = fault->after_events;
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

  if (type.review) return Respond(*ctx, Review(*ctx), res);
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
  for (const auto& text : ctx.warnings) {
    // Go's strconv.Quote-style text in a warn-code 299 header, as apiserver's warning recorder.
    res.set_header("Warning", absl::StrCat("299 - ", Json(text).dump()));
  }
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
  for (const auto& [k, v] : ctx.audit_annotations) e["annotations"][k] = v;
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
    Json j = ParseJson(req.body);
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
  if (req.path == "/_sim/audit" && req.method == "POST") {
    // {"hold": true} queues audit events without sending them; {"hold": false} releases them.
    Json j = ParseJson(req.body);
    if (!j.is_object() || !j.contains("hold") || !j["hold"].is_boolean()) {
      return Reply::Err(BadRequest("want {\"hold\": true|false}"));
    }
    if (!audit_) return Reply::Err(BadRequest("no audit webhook is configured"));
    audit_->SetHeld(j["hold"].get<bool>());
    return ok;
  }
  if (req.path == "/_sim/requests" && req.method == "GET") {
    // The request log (method and request URI, oldest first).
    std::lock_guard lock(log_mu_);
    return Reply::Of(200, {{"requests", log_}});
  }
  if (req.path == "/_sim/admission" && req.method == "GET") {
    // Validating webhook calls, oldest first.
    Json calls = Json::array();
    for (const WebhookCall& c : webhook_calls_.Calls()) {
      calls.push_back({{"configuration", c.configuration},
                       {"webhook", c.webhook},
                       {"operation", c.operation},
                       {"resource", c.resource},
                       {"namespace", c.namespace_},
                       {"name", c.name},
                       {"dryRun", c.dry_run},
                       {"outcome", OutcomeName(c.outcome)},
                       {"message", c.message}});
    }
    return Reply::Of(200, {{"calls", calls}});
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
                    {"eventsDropped", st.events_dropped},
                    {"eventsQueued", st.events_queued},
                    {"held", st.held}};
    }
    return Reply::Of(200, s);
  }
  return Reply::Err(PathNotFound());
}

// ---------------------------------------------------------------------------------------------
// Public API

KubeSim::KubeSim(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeSim::~KubeSim() { Stop(); }

absl::StatusOr<std::unique_ptr<KubeSim>> KubeSim::Start(KubeSimOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) {
    impl->Stop();  // joins the threads a partial start left running
    return s;
  }
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
WebhookCallLog& KubeSim::webhook_calls() { return impl_->webhook_calls_; }

bool KubeSim::WaitForNamespaceController(absl::Duration timeout) const {
  std::unique_lock lock(impl_->namespace_mu_);
  return impl_->namespace_cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] {
    return impl_->terminating_namespaces_.empty() && !impl_->namespace_controller_busy_;
  });
}

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
