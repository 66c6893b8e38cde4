#pragma once

// Internal to kube-sim: the server's implementation class and the request/reply types its
// handler files share. Not part of the library's interface (a private header in srcs).

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
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
#include "tools/kube-sim/crd_schema.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/managed_fields.h"
#include "tools/kube-sim/object_rules.h"
#include "tools/kube-sim/patch.h"
#include "tools/kube-sim/protobuf.h"
#include "tools/kube-sim/request_info.h"
#include "tools/kube-sim/selectors.h"
#include "tools/kube-sim/yaml_json.h"

namespace reverser::kubesim {

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
  int cut_watch_after = -1;           // a kCutWatch fault hit: initial events sent before the cut
  std::vector<std::string> warnings;  // sent as `Warning: 299 - "<text>"` headers
  // Admission webhooks' auditAnnotations ("<webhook name>/<key>"), added to the audit event.
  std::map<std::string, std::string> audit_annotations;

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

inline std::string MediaType(const std::string& content_type) {
  std::string t(absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';'))));
  return absl::AsciiStrToLower(t);
}

inline Json StripForList(Json o) {
  o.erase("kind");
  o.erase("apiVersion");
  return o;
}

// Appends StripForList(object).dump() without copying the object: member by member, in the
// order nlohmann writes them (a list of 100,000 made that many deep copies and frees).
inline void AppendStrippedForList(std::string& out, const Json& object) {
  if (!object.is_object()) {
    out += object.dump();
    return;
  }
  out += '{';
  bool first = true;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it.key() == "kind" || it.key() == "apiVersion") continue;
    if (!first) out += ',';
    first = false;
    out += Json(it.key()).dump();
    out += ':';
    out += it.value().dump();
  }
  out += '}';
}

struct ContinueToken {
  int64_t rv = 0;
  std::string start;
};

inline std::string EncodeContinue(int64_t rv, const std::string& start) {
  Json j = {{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", start + std::string(1, '\0')}};
  return absl::WebSafeBase64Escape(j.dump());
}

inline std::optional<ContinueToken> DecodeContinue(const std::string& token) {
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

inline std::string ObjectKeyOf(const Json& o) {
  const Json& m = o["metadata"];
  return absl::StrCat(m.value("namespace", ""), "/", m.value("name", ""));
}

inline int64_t ParseRv(const std::string& s) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return -1;
  return v;
}

// One watch event line, `{"type":"<type>","object":<object_json>}` and a newline, from an
// object already rendered (StoredObject::json): no serialisation per watcher.
inline void AppendWatchLine(std::string& out, absl::string_view type,
                            absl::string_view object_json) {
  absl::StrAppend(&out, "{\"type\":\"", type, "\",\"object\":", object_json, "}\n");
}

inline std::string WatchLine(const std::string& type, const Json& object) {
  std::string line;
  AppendWatchLine(line, type, object.dump());
  return line;
}

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
  WebhookCallLog webhook_calls_;
  std::unique_ptr<ValidatingWebhooks> webhooks_;
  // The namespace controller: namespaces being deleted wait here until their contents are gone.
  mutable std::mutex namespace_mu_;
  mutable std::condition_variable namespace_cv_;
  std::set<std::string> terminating_namespaces_;
  bool namespace_controller_busy_ = false;
  bool namespace_controller_stop_ = false;
  std::thread namespace_controller_;
  void RunNamespaceController();
  // A namespace became Terminating: hand it to the controller (or run it now, when synchronous).
  void StartNamespaceDeletion(const std::string& name);
  // Deletes what is in the namespace and finalizes it once empty; returns whether it is done.
  bool FinalizeNamespace(const std::string& name);

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
  // TokenReview / SubjectAccessReview (reviews.cc): every verb of a review type lands here
  // after the request itself was authorized.
  Reply Review(Ctx& ctx);
  Reply TokenReview(Ctx& ctx, const Json& body);
  Reply SubjectAccessReview(Ctx& ctx, const Json& body);
  // The echoed object's metadata: as sent, with managedFields (and the legacy profile's
  // creationTimestamp: null), as the real create handler returns for unstored kinds.
  Json ReviewMetadata(Ctx& ctx, const Json& sent, const Json& spec, const ResourceType& type);

  // Shared write path: `transform` turns the current object (nullptr: absent) into the desired
  // one; the rest (conflicts, no-ops, managedFields, finalizer completion) happens here.
  using Transform = std::function<ApiOr<Json>(const Json* current)>;
  // What the validating webhooks are asked about a write `mutator` decided (nullopt: nothing).
  using ReviewBuilder = std::function<std::optional<AdmissionAttributes>(const Json* current)>;
  // A store write with validating admission between deciding and storing: `mutator` decides
  // under the store lock (nothing stored), the webhooks are asked outside it, and exactly that
  // decision is stored if the object did not change meanwhile (otherwise it is decided, and
  // asked about, again), as kube-apiserver's optimistic update loop does.
  ApiOr<WriteResult> AdmittedWrite(Ctx& ctx, const ResourceType& type, const std::string& ns,
                                   const std::string& name, const Mutator& mutator,
                                   const ReviewBuilder& review,
                                   const std::vector<Json>& configurations);
  // The stored ValidatingWebhookConfigurations that apply to writes of `type` (none for the
  // admission configuration types themselves).
  std::vector<Json> WebhookConfigurations(const ResourceType& type) const;
  std::optional<ApiError> Admit(Ctx& ctx, const AdmissionAttributes& attrs,
                                const std::vector<Json>& configurations);
  // The namespace field of an admission request (a Namespace's own name for namespaces).
  std::string AdmissionNamespace(const ResourceType& type, const std::string& ns,
                                 const std::string& name) const;
  // Serves a request in-process as a controller's service account (audited as in a cluster).
  void ServeAsController(const std::string& method, const std::string& path, const Json& body,
                         const UserInfo& user, const std::string& controller);
  ApiOr<WriteResult> WriteObject(Ctx& ctx, const std::string& ns, const std::string& name,
                                 const Transform& transform, bool create_if_missing,
                                 const std::string& operation, const Json& applied);
  // `collection`: an item of a deletecollection (its admission request carries no name).
  ApiOr<WriteResult> DeleteObject(Ctx& ctx, const ResourceType& type, const std::string& ns,
                                  const std::string& name, const Json& options,
                                  bool collection = false);
  void AfterWrite(Ctx& ctx, const ResourceType& type, const WriteResult& r);
  std::optional<ApiError> ParseBody(Ctx& ctx, Json& out, bool allow_yaml_apply);
  // A custom resource write against its CRD schema: unknown fields pruned (fieldValidation
  // Strict: a 400; Warn, the default: warnings; `applied`: a server-side apply patch, whose
  // unknown fields always fail), then defaults.
  std::optional<ApiError> PruneAndDefault(Ctx& ctx, const ResourceType& type, Json& object,
                                          const Json* applied);
  // The schema's field errors for the object about to be stored (`current`: the stored one).
  std::vector<StatusCause> ValidateSchema(const ResourceType& type, const Json& object,
                                          const Json* current) const;
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

}  // namespace reverser::kubesim
