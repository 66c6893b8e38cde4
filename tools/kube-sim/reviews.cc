// TokenReview and SubjectAccessReview: answered per request from the Authenticator and the
// Authorizer and never stored, as kube-apiserver's registries for them
// (pkg/registry/authentication/tokenreview, pkg/registry/authorization/subjectaccessreview).

#include "tools/kube-sim/server_internal.h"

namespace reverser::kubesim {
namespace {

// encoding/json's name for a JSON value's type in an UnmarshalTypeError.
std::string JsonTypeName(const Json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "bool";
  if (v.is_number()) return "number";
  if (v.is_array()) return "array";
  return "object";
}

const Json& Member(const Json& object, const char* key) {
  static const Json* null = new Json(nullptr);
  if (!object.is_object()) return *null;
  auto it = object.find(key);
  return it == object.end() ? *null : *it;
}

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Reads a review's typed fields as the apiserver's decoder does: null is the zero value, a
// value of the wrong JSON type fails the request with the decoder's 400 (the first one wins).
class Decoder {
 public:
  explicit Decoder(const ResourceType& type) : type_(type) {}

  const std::optional<ApiError>& error() const { return error_; }

  // `go_struct`: the Go struct holding the field ("TokenReviewSpec"); `path`: the JSON path of
  // `parent` ("spec").
  std::string String(const Json& parent, const char* key, const char* go_struct,
                     const std::string& path) {
    const Json& v = Member(parent, key);
    if (v.is_null()) return "";
    if (!v.is_string()) {
      Fail(go_struct, absl::StrCat(path, ".", key), v, "string");
      return "";
    }
    return v.get<std::string>();
  }

  std::vector<std::string> Strings(const Json& parent, const char* key, const char* go_struct,
                                   const std::string& path) {
    std::vector<std::string> out;
    const Json& v = Member(parent, key);
    if (v.is_null()) return out;
    const std::string field = absl::StrCat(path, ".", key);
    if (!v.is_array()) {
      Fail(go_struct, field, v, "[]string");
      return out;
    }
    for (const auto& e : v) {
      if (e.is_null()) {
        out.emplace_back();
      } else if (!e.is_string()) {
        Fail(go_struct, field, e, "string");
      } else {
        out.push_back(e.get<std::string>());
      }
    }
    return out;
  }

  std::map<std::string, std::vector<std::string>> Extra(const Json& parent, const char* go_struct,
                                                        const std::string& path) {
    std::map<std::string, std::vector<std::string>> out;
    const Json& v = Member(parent, "extra");
    if (v.is_null()) return out;
    const std::string field = absl::StrCat(path, ".extra");
    if (!v.is_object()) {
      Fail(go_struct, field, v, "map[string]v1.ExtraValue");
      return out;
    }
    for (const auto& [k, values] : v.items()) {
      auto& list = out[k];
      if (values.is_null()) continue;
      if (!values.is_array()) {
        Fail(go_struct, absl::StrCat(field, ".", k), values, "v1.ExtraValue");
        continue;
      }
      for (const auto& e : values) {
        if (!e.is_string() && !e.is_null()) {
          Fail(go_struct, absl::StrCat(field, ".", k), e, "string");
        } else {
          list.push_back(e.is_null() ? "" : e.get<std::string>());
        }
      }
    }
    return out;
  }

  // A nested struct (or pointer to one): null or an object.
  bool Object(const Json& parent, const char* key, const char* go_struct, const std::string& path,
              const char* go_type) {
    const Json& v = Member(parent, key);
    if (v.is_null()) return false;
    if (!v.is_object()) {
      Fail(go_struct, path.empty() ? key : absl::StrCat(path, ".", key), v, go_type);
      return false;
    }
    return true;
  }

 private:
  void Fail(const char* go_struct, const std::string& field, const Json& v,
            const std::string& go_type) {
    if (error_) return;
    error_ = BadRequest(
        absl::StrCat(type_.kind, " in version \"", type_.version, "\" cannot be handled as a ",
                     type_.kind, ": json: cannot unmarshal ", JsonTypeName(v),
                     " into Go struct field ", go_struct, ".", field, " of type ", go_type));
  }

  const ResourceType& type_;
  std::optional<ApiError> error_;
};

// Go's %q of a string (what %#v prints for string fields); JSON quoting agrees for the
// printable ASCII these hold.
std::string GoQuote(const std::string& s) { return Json(s).dump(); }

}  // namespace

Reply KubeSim::Impl::Review(Ctx& ctx) {
  const RequestInfo& info = ctx.info;
  const ResourceType& type = *ctx.type;
  // The router has one route for a review: POST on the collection. Another method there is
  // its 405, a deeper path (a name) its 404.
  if (!info.name.empty() || !info.subresource.empty()) return Reply::Err(PathNotFound());
  if (info.verb != "create") return Reply::Err(MethodNotAllowed());
  Json body;
  if (auto err = ParseBody(ctx, body, false)) return Reply::Err(*err);
  ctx.request_object = body;
  if (!body.is_object()) {
    return Reply::Err(
        BadRequest("Object 'Kind' is missing in '" + ctx.req->body.substr(0, 100) + "'"));
  }
  const Json& kind = Member(body, "kind");
  if (kind.is_string() && !kind.get<std::string>().empty() && kind != type.kind) {
    const std::string k = kind.get<std::string>();
    return Reply::Err(BadRequest(absl::StrCat(
        k, " in version \"", type.version, "\" cannot be handled as a ", type.kind, ": no kind \"",
        k, "\" is registered for version \"", type.ApiVersion(), "\" in scheme")));
  }
  if (type.plural == "tokenreviews") return TokenReview(ctx, body);
  return SubjectAccessReview(ctx, body);
}

Json KubeSim::Impl::ReviewMetadata(Ctx& ctx, const Json& sent, const Json& spec,
                                   const ResourceType& type) {
  Json meta = Member(sent, "metadata").is_object() ? sent["metadata"] : Json::object();
  meta.erase("managedFields");
  // A zero creationTimestamp is written as null before 1.34 and left out since.
  if (options_.profile == Profile::kLegacy) {
    if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = nullptr;
  } else if (meta.contains("creationTimestamp") && meta["creationTimestamp"].is_null()) {
    meta.erase("creationTimestamp");
  }
  // The create handler's field manager runs for these kinds too: an Update entry owning the
  // fields sent (real responses carry it, e.g. {"f:spec":{"f:token":{}}}).
  ManagerWrite write{FieldManager(ctx), "Update", "", type.ApiVersion(), absl::Now()};
  Json tracked = UpdateManagedFields(Json(nullptr), Json{{"metadata", meta}, {"spec", spec}},
                                     Json(nullptr), write);
  return tracked["metadata"];
}

Reply KubeSim::Impl::TokenReview(Ctx& ctx, const Json& body) {
  const ResourceType& type = *ctx.type;
  Decoder d(type);
  const char* kSpec = "TokenReviewSpec";
  d.Object(body, "spec", "TokenReview", "", "v1.TokenReviewSpec");
  const Json& spec_in = Member(body, "spec");
  std::string token = d.String(spec_in, "token", kSpec, "spec");
  std::vector<std::string> audiences = d.Strings(spec_in, "audiences", kSpec, "spec");
  if (d.error()) return Reply::Err(*d.error());
  if (token.empty()) {
    return Reply::Err(BadRequest("token is required for TokenReview in authentication"));
  }

  // The spec comes back as sent (the token included: real responses echo it).
  Json spec = {{"token", token}};
  if (!audiences.empty()) spec["audiences"] = audiences;

  // Token-file users are audience-agnostic: the token is good for the server's own audiences,
  // so a review naming other audiences only fails (kube-apiserver's audience-agnostic wrapper).
  const std::vector<std::string>& server = options_.api_audiences;
  const std::vector<std::string>& wanted = audiences.empty() ? server : audiences;
  std::vector<std::string> granted;
  for (const auto& a : server) {
    if (Contains(wanted, a)) granted.push_back(a);
  }
  const bool audience_ok = wanted.empty() || !granted.empty();
  std::optional<UserInfo> user = authn_.LookupToken(token);
  Json status;
  if (user && audience_ok) {
    // TokenReviewStatus: authenticated, user, audiences (omitted when empty).
    status = {{"authenticated", true}, {"user", user->ToJson()}};
    if (!granted.empty()) status["audiences"] = granted;
  } else {
    // `authenticated: false` is omitted (omitempty) and `user` is always there (a struct);
    // the error is the bearer-token authenticator's for a token no authenticator knows.
    status = {{"user", Json::object()}, {"error", "invalid bearer token"}};
  }
  Json out = {{"kind", type.kind},
              {"apiVersion", type.ApiVersion()},
              {"metadata", ReviewMetadata(ctx, body, spec, type)},
              {"spec", spec},
              {"status", status}};
  return Reply::Of(201, out);
}

Reply KubeSim::Impl::SubjectAccessReview(Ctx& ctx, const Json& body) {
  const ResourceType& type = *ctx.type;
  Decoder d(type);
  const char* kSpec = "SubjectAccessReviewSpec";
  d.Object(body, "spec", "SubjectAccessReview", "", "v1.SubjectAccessReviewSpec");
  const Json& spec_in = Member(body, "spec");
  const bool has_resource =
      d.Object(spec_in, "resourceAttributes", kSpec, "spec", "v1.ResourceAttributes");
  const bool has_non_resource =
      d.Object(spec_in, "nonResourceAttributes", kSpec, "spec", "v1.NonResourceAttributes");
  const Json& ra = Member(spec_in, "resourceAttributes");
  const Json& nra = Member(spec_in, "nonResourceAttributes");
  const std::string ra_path = "spec.resourceAttributes";
  const char* kRa = "ResourceAttributes";
  AuthzAttributes attrs;
  attrs.namespace_ = d.String(ra, "namespace", kRa, ra_path);
  attrs.verb = d.String(ra, "verb", kRa, ra_path);
  attrs.api_group = d.String(ra, "group", kRa, ra_path);
  std::string version = d.String(ra, "version", kRa, ra_path);
  attrs.resource = d.String(ra, "resource", kRa, ra_path);
  attrs.subresource = d.String(ra, "subresource", kRa, ra_path);
  attrs.name = d.String(ra, "name", kRa, ra_path);
  d.Object(ra, "fieldSelector", kRa, ra_path, "v1.FieldSelectorAttributes");
  d.Object(ra, "labelSelector", kRa, ra_path, "v1.LabelSelectorAttributes");
  const std::string nra_path = "spec.nonResourceAttributes";
  std::string path = d.String(nra, "path", "NonResourceAttributes", nra_path);
  std::string nr_verb = d.String(nra, "verb", "NonResourceAttributes", nra_path);
  UserInfo subject;
  subject.username = d.String(spec_in, "user", kSpec, "spec");
  subject.groups = d.Strings(spec_in, "groups", kSpec, "spec");
  subject.extra = d.Extra(spec_in, kSpec, "spec");
  subject.uid = d.String(spec_in, "uid", kSpec, "spec");
  if (d.error()) return Reply::Err(*d.error());

  // The spec as the decoder leaves it (empty fields omitted).
  Json spec = Json::object();
  if (has_resource) {
    Json r = Json::object();
    for (const auto& [k, v] :
         std::vector<std::pair<const char*, std::string>>{{"namespace", attrs.namespace_},
                                                          {"verb", attrs.verb},
                                                          {"group", attrs.api_group},
                                                          {"version", version},
                                                          {"resource", attrs.resource},
                                                          {"subresource", attrs.subresource},
                                                          {"name", attrs.name}}) {
      if (!v.empty()) r[k] = v;
    }
    for (const char* k : {"fieldSelector", "labelSelector"}) {
      if (Member(ra, k).is_object()) r[k] = ra[k];
    }
    spec["resourceAttributes"] = r;
  }
  if (has_non_resource) {
    Json r = Json::object();
    if (!path.empty()) r["path"] = path;
    if (!nr_verb.empty()) r["verb"] = nr_verb;
    spec["nonResourceAttributes"] = r;
  }
  if (!subject.username.empty()) spec["user"] = subject.username;
  if (!subject.groups.empty()) spec["groups"] = subject.groups;
  if (!subject.extra.empty()) spec["extra"] = subject.extra;
  if (!subject.uid.empty()) spec["uid"] = subject.uid;
  Json meta = ReviewMetadata(ctx, body, spec, type);

  // ValidateSubjectAccessReview (pkg/apis/authorization/validation), in its order.
  const bool modern = options_.profile == Profile::kModern;
  std::vector<StatusCause> causes;
  if (has_resource && has_non_resource) {
    // The bad value is the internal NonResourceAttributes struct, printed with %#v.
    causes.push_back({"FieldValueInvalid",
                      absl::StrCat("Invalid value: authorization.NonResourceAttributes{Path:",
                                   GoQuote(path), ", Verb:", GoQuote(nr_verb),
                                   "}: cannot be specified in combination with resourceAttributes"),
                      "spec.nonResourceAttributes"});
  }
  if (!has_resource && !has_non_resource) {
    // The value is the nil NonResourceAttributes: "null" (quoted before 1.34's field errors).
    causes.push_back(FieldInvalid("spec.resourceAttributes", modern ? Json(nullptr) : Json("null"),
                                  "exactly one of nonResourceAttributes or resourceAttributes "
                                  "must be specified"));
  }
  if (subject.username.empty() && subject.groups.empty()) {
    causes.push_back(
        FieldInvalid("spec.user", Json(""), "at least one of user or group must be specified"));
  }
  Json sent_meta = Member(body, "metadata").is_object() ? body["metadata"] : Json::object();
  sent_meta.erase("managedFields");
  if (sent_meta.contains("creationTimestamp") && sent_meta["creationTimestamp"].is_null()) {
    sent_meta.erase("creationTimestamp");
  }
  if (!sent_meta.empty()) {
    // The bad value is the whole ObjectMeta (%#v); its identifying fields are shown here.
    causes.push_back(
        {"FieldValueInvalid",
         absl::StrCat("Invalid value: v1.ObjectMeta{Name:", GoQuote(sent_meta.value("name", "")),
                      ", GenerateName:", GoQuote(sent_meta.value("generateName", "")),
                      ", Namespace:", GoQuote(sent_meta.value("namespace", "")),
                      ", ...}: must be empty"),
         "metadata"});
  }
  if (!causes.empty()) {
    // The REST layer names the kind from the decoded internal object, whose TypeMeta is
    // empty: `.authorization.k8s.io "" is invalid: ...`, details without a kind.
    ApiError e = Invalid(ErrorSubject{type.group, type.plural, ""}, "", causes);
    e.details.erase("kind");
    return Reply::Err(e);
  }

  if (has_non_resource) {
    attrs = AuthzAttributes{};
    attrs.non_resource = true;
    attrs.verb = nr_verb;
    attrs.path = path;
  }
  AuthzDecision decision = authz_.Decide(subject, attrs);
  // SubjectAccessReviewStatus: allowed always, reason when given; `denied` is for an
  // authorizer's explicit deny, which RBAC never gives.
  Json status = {{"allowed", decision.allowed}};
  if (!decision.reason.empty()) status["reason"] = decision.reason;
  Json out = {{"kind", type.kind},
              {"apiVersion", type.ApiVersion()},
              {"metadata", meta},
              {"spec", spec},
              {"status", status}};
  return Reply::Of(201, out);
}

}  // namespace reverser::kubesim
