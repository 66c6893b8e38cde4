// Writes: create, update, patch, delete, deletecollection; CRD registration; GC.

#include "tools/kube-sim/server_internal.h"

namespace reverser::kubesim {

// ---------------------------------------------------------------------------------------------
// Writes

namespace {

// The request's DeleteOptions (an empty body: none), kept for the audit log.
ApiOr<Json> ReadDeleteOptions(Ctx& ctx) {
  if (ctx.req->body.empty()) return Json::object();
  Json options = ParseJson(ctx.req->body);
  if (options.is_discarded() || !options.is_object()) {
    return BadRequest("json parse error in DeleteOptions");
  }
  ctx.request_object = options;
  return options;
}

}  // namespace

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
    out = ParseJson(ctx.req->body);
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
  // The object as it would be stored: what validating webhooks see (kept only when some exist).
  const std::vector<Json> configurations = WebhookConfigurations(type);
  Json admitted;
  Mutator mutator = [&](const Json* current) -> ApiOr<WriteDecision> {
    if (!current && !create_if_missing) return NotFound(type.Subject(), name);
    ApiOr<Json> desired = transform(current);
    if (!desired.ok()) return desired.error();
    Json next = std::move(*desired);
    if (auto type_error = CheckFieldTypes(type, next)) return *type_error;
    if (type.schema) {
      if (auto schema_error =
              PruneAndDefault(ctx, type, next, operation == "Apply" ? &applied : nullptr)) {
        return *schema_error;
      }
    }
    next["kind"] = type.kind;
    next["apiVersion"] = type.ApiVersion();
    if (!next["metadata"].is_object()) next["metadata"] = Json::object();
    if (!current) {
      next["metadata"]["name"] = name;
      if (type.namespaced) next["metadata"]["namespace"] = ns;
      std::vector<StatusCause> causes = ValidateObject(type, next);
      if (!causes.empty()) return Invalid(type.Subject(), name, causes);
      next = PrepareForCreate(type, std::move(next), now);
      causes = ValidateSchema(type, next, nullptr);
      if (!causes.empty()) return Invalid(type.Subject(), name, causes);
      next = UpdateManagedFields(Json(nullptr), next, applied, write);
      if (!configurations.empty()) admitted = next;
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
    std::vector<StatusCause> schema_causes = ValidateSchema(type, next, current);
    causes.insert(causes.end(), schema_causes.begin(), schema_causes.end());
    if (!causes.empty()) return Invalid(type.Subject(), name, causes);
    next["metadata"]["managedFields"] =
        (*current)["metadata"].value("managedFields", Json::array());
    next = UpdateManagedFields(*current, next, applied, write);
    if (!configurations.empty()) admitted = next;
    if (SameContent(next, *current)) {
      return WriteDecision{WriteDecision::Kind::kNoChange, *current};
    }
    // Removing the last finalizer of an object being deleted completes the deletion. Like the
    // real registry, the stored state is deleted, so DELETED shows the last stored object
    // (finalizers included) at the deletion's resourceVersion.
    // A namespace also waits for its spec.finalizers (the namespace controller's).
    const bool namespace_finalized =
        type.plural != "namespaces" || !type.group.empty() ||
        next.value("spec", Json::object()).value("finalizers", Json::array()).empty();
    if (next["metadata"].contains("deletionTimestamp") &&
        next["metadata"].value("finalizers", Json::array()).empty() && namespace_finalized) {
      return WriteDecision{WriteDecision::Kind::kDelete, *current};
    }
    return WriteDecision{WriteDecision::Kind::kPut, std::move(next)};
  };
  auto review = [&](const Json* current) -> std::optional<AdmissionAttributes> {
    AdmissionAttributes a;
    a.operation = current ? "UPDATE" : "CREATE";
    a.type = ctx.type;
    a.subresource = ctx.info.subresource;
    a.name = name;
    a.namespace_ = AdmissionNamespace(type, ns, name);
    a.user = ctx.effective_user();
    a.dry_run = ctx.dry_run;
    if (ctx.info.subresource == "scale") {
      // The scale subresource speaks autoscaling/v1 Scale.
      a.kind_group = "autoscaling";
      a.kind_version = "v1";
      a.kind = "Scale";
      a.object = ToScale(type, admitted);
      if (current) a.old_object = ToScale(type, *current);
    } else {
      a.object = admitted;
      if (current) a.old_object = *current;
    }
    a.options = {{"kind", current ? "UpdateOptions" : "CreateOptions"},
                 {"apiVersion", "meta.k8s.io/v1"}};
    if (ctx.dry_run) a.options["dryRun"] = {"All"};
    if (ctx.Has("fieldManager")) a.options["fieldManager"] = ctx.Param("fieldManager");
    if (ctx.Has("fieldValidation")) a.options["fieldValidation"] = ctx.Param("fieldValidation");
    return a;
  };
  ApiOr<WriteResult> r = AdmittedWrite(ctx, type, ns, name, mutator, review, configurations);
  if (r.ok() && !ctx.dry_run) AfterWrite(ctx, type, *r);
  return r;
}

std::vector<Json> KubeSim::Impl::WebhookConfigurations(const ResourceType& type) const {
  if (IsAdmissionConfigurationResource(type)) return {};
  ApiOr<Store::Snapshot> snap =
      store_.List("admissionregistration.k8s.io/validatingwebhookconfigurations", "");
  if (!snap.ok()) return {};
  return std::move(snap->items);
}

std::string KubeSim::Impl::AdmissionNamespace(const ResourceType& type, const std::string& ns,
                                              const std::string& name) const {
  if (type.group.empty() && type.plural == "namespaces") return name;
  return type.namespaced ? ns : "";
}

std::optional<ApiError> KubeSim::Impl::Admit(Ctx& ctx, const AdmissionAttributes& attrs,
                                             const std::vector<Json>& configurations) {
  AdmissionSideInfo side;
  std::optional<ApiError> rejection = webhooks_->Admit(
      attrs, configurations,
      [this](const std::string& ns) { return store_.Get("/namespaces", "", ns); },
      [this](const std::string& group, const std::string& plural) {
        std::vector<std::string> versions;
        for (const auto& t : types_.All()) {
          if (t->group == group && t->plural == plural) versions.push_back(t->version);
        }
        return versions;
      },
      &side);
  for (auto& w : side.warnings) {
    if (std::find(ctx.warnings.begin(), ctx.warnings.end(), w) == ctx.warnings.end()) {
      ctx.warnings.push_back(std::move(w));
    }
  }
  ctx.audit_annotations.insert(side.audit_annotations.begin(), side.audit_annotations.end());
  return rejection;
}

ApiOr<WriteResult> KubeSim::Impl::AdmittedWrite(Ctx& ctx, const ResourceType& type,
                                                const std::string& ns, const std::string& name,
                                                const Mutator& mutator, const ReviewBuilder& review,
                                                const std::vector<Json>& configurations) {
  if (configurations.empty()) return store_.Write(type.Key(), ns, name, mutator, ctx.dry_run);
  constexpr int kMaxAttempts = 10;
  for (int attempt = 1;; ++attempt) {
    std::optional<Json> seen;
    WriteDecision decision;
    Mutator decide = [&](const Json* current) -> ApiOr<WriteDecision> {
      if (current) seen = *current;
      ApiOr<WriteDecision> d = mutator(current);
      if (d.ok()) decision = *d;
      return d;
    };
    ApiOr<WriteResult> decided = store_.Write(type.Key(), ns, name, decide, /*dry_run=*/true);
    if (!decided.ok()) return decided;
    if (std::optional<AdmissionAttributes> attrs = review(seen ? &*seen : nullptr)) {
      if (auto rejection = Admit(ctx, *attrs, configurations)) return *rejection;
    }
    if (ctx.dry_run) return decided;
    bool raced = false;
    Mutator commit = [&](const Json* current) -> ApiOr<WriteDecision> {
      const bool unchanged = current
                                 ? seen && (*current)["metadata"].value("resourceVersion", "") ==
                                               (*seen)["metadata"].value("resourceVersion", "")
                                 : !seen;
      if (!unchanged) {
        raced = true;
        return ModifiedConflict(type.Subject(), name);
      }
      return decision;
    };
    ApiOr<WriteResult> r = store_.Write(type.Key(), ns, name, commit, false);
    if (r.ok() || !raced || attempt == kMaxAttempts) return r;
  }
}

std::optional<ApiError> KubeSim::Impl::PruneAndDefault(Ctx& ctx, const ResourceType& type,
                                                       Json& object, const Json* applied) {
  const CrdSchema& schema = *type.schema;
  if (applied) {
    // Server-side apply types the patch itself: a field the schema lacks fails the request
    // whatever fieldValidation says (structured-merge-diff's error, a 500 without a reason).
    Json patch = *applied;
    std::vector<std::string> unknown = schema.Prune(patch);
    if (!unknown.empty()) {
      std::vector<std::string> errors;
      for (const auto& path : unknown) {
        errors.push_back(absl::StrCat(".", path, ": field not declared in schema"));
      }
      ApiError e;
      e.code = 500;
      e.message = absl::StrCat(
          "failed to create typed patch object (", type.ApiVersion(), ", Kind=", type.kind, "): ",
          errors.size() == 1 ? errors[0]
                             : absl::StrCat("errors:\n  ", absl::StrJoin(errors, "\n  ")));
      return e;
    }
  }
  std::vector<std::string> unknown = schema.Prune(object);
  if (!unknown.empty()) {
    std::vector<std::string> errors;
    for (const auto& path : unknown) errors.push_back(absl::StrCat("unknown field \"", path, "\""));
    const std::string directive = ctx.Param("fieldValidation");
    if (directive == "Strict") {
      return BadRequest(absl::StrCat(type.kind, " in version \"", type.version,
                                     "\" cannot be handled as a ", type.kind,
                                     ": strict decoding error: ", absl::StrJoin(errors, ", ")));
    }
    if (directive != "Ignore") {
      for (auto& e : errors) {
        if (std::find(ctx.warnings.begin(), ctx.warnings.end(), e) == ctx.warnings.end()) {
          ctx.warnings.push_back(std::move(e));
        }
      }
    }
  }
  schema.Default(object);
  return std::nullopt;
}

std::vector<StatusCause> KubeSim::Impl::ValidateSchema(const ResourceType& type, const Json& object,
                                                       const Json* current) const {
  if (!type.schema) return {};
  return type.schema->Validate(object, current,
                               {.modern_messages = options_.profile == Profile::kModern});
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
      ServeAsController("DELETE", path,
                        Json{{"kind", "DeleteOptions"},
                             {"apiVersion", "v1"},
                             {"propagationPolicy", "Background"},
                             {"preconditions",
                              {{"uid", m.value("uid", "")},
                               {"resourceVersion", m.value("resourceVersion", "")}}}},
                        kGarbageCollector, "generic-garbage-collector");
    }
  }
}

void KubeSim::Impl::ServeAsController(const std::string& method, const std::string& path,
                                      const Json& body, const UserInfo& user,
                                      const std::string& controller) {
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.target = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("User-Agent",
                 absl::StrCat("kube-controller-manager/v1.34.0 (linux/amd64) kubernetes/kube-sim/"
                              "system:serviceaccount:kube-system:",
                              controller));
  req.remote_addr = "127.0.0.1";
  httplib::Response res;
  Serve(req, res, &user);
}

// ---------------------------------------------------------------------------------------------
// The namespace controller

void KubeSim::Impl::StartNamespaceDeletion(const std::string& name) {
  if (!options_.async_namespace_controller) {
    FinalizeNamespace(name);
    return;
  }
  std::lock_guard lock(namespace_mu_);
  terminating_namespaces_.insert(name);
  namespace_cv_.notify_all();
}

void KubeSim::Impl::RunNamespaceController() {
  std::unique_lock lock(namespace_mu_);
  while (!namespace_controller_stop_) {
    if (terminating_namespaces_.empty()) {
      namespace_cv_.wait(lock);
      continue;
    }
    std::set<std::string> work = terminating_namespaces_;
    namespace_controller_busy_ = true;
    lock.unlock();
    std::set<std::string> done;
    for (const auto& name : work) {
      if (FinalizeNamespace(name)) done.insert(name);
    }
    lock.lock();
    namespace_controller_busy_ = false;
    for (const auto& name : done) terminating_namespaces_.erase(name);
    namespace_cv_.notify_all();
    // Contents held by finalizers: look again shortly, as the real controller requeues.
    if (!terminating_namespaces_.empty() && !namespace_controller_stop_) {
      namespace_cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
}

bool KubeSim::Impl::FinalizeNamespace(const std::string& name) {
  static const UserInfo kNamespaceController{
      "system:serviceaccount:kube-system:namespace-controller",
      NewUid(),
      {"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
      {}};
  std::optional<Json> ns = store_.Get("/namespaces", "", name);
  if (!ns || !(*ns)["metadata"].contains("deletionTimestamp")) return true;
  // One deletecollection per namespaced type, empty or not, as the controller sends them.
  bool empty = true;
  for (const auto& t : types_.All()) {
    if (!t->namespaced || t->review || !t->HasVerb("deletecollection")) continue;
    ServeAsController(
        "DELETE",
        absl::StrCat(t->group.empty() ? "/api/" : "/apis/" + t->group + "/", t->version,
                     "/namespaces/", name, "/", t->plural),
        Json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Background"}},
        kNamespaceController, "namespace-controller");
    ApiOr<Store::Snapshot> after = store_.List(t->Key(), name);
    if (after.ok() && !after->items.empty()) empty = false;
  }
  if (!empty) return false;
  Json finalize = *ns;
  finalize["spec"]["finalizers"] = Json::array();
  finalize["metadata"].erase("managedFields");
  ServeAsController("PUT", absl::StrCat("/api/v1/namespaces/", name, "/finalize"), finalize,
                    kNamespaceController, "namespace-controller");
  // Done unless the finalize lost a race (then the next round tries again).
  std::optional<Json> now = store_.Get("/namespaces", "", name);
  return !now || now->value("spec", Json::object()).value("finalizers", Json::array()).empty();
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
    patch = ParseJson(ctx.req->body);
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
                                               const Json& options, bool collection) {
  const bool is_namespace = type.group.empty() && type.plural == "namespaces";
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
    if (is_namespace) {
      if (meta.contains("deletionTimestamp")) {
        return Conflict(type.Subject(), name,
                        "The system is ensuring all content is removed from this namespace.  "
                        "Upon completion, this namespace will automatically be purged by the "
                        "system.");
      }
      const Json& spec_finalizers =
          current->value("spec", Json::object()).value("finalizers", Json::array());
      if (spec_finalizers.is_array() && !spec_finalizers.empty()) {
        // The namespace controller empties it and then removes its finalizer.
        Json next = *current;
        next["metadata"]["deletionTimestamp"] = Rfc3339(now);
        next["metadata"]["deletionGracePeriodSeconds"] = 0;
        next["status"]["phase"] = "Terminating";
        return WriteDecision{WriteDecision::Kind::kPut, std::move(next)};
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
  auto review = [&](const Json* current) -> std::optional<AdmissionAttributes> {
    if (!current) return std::nullopt;
    AdmissionAttributes a;
    a.operation = "DELETE";
    a.type = types_.Find(type.group, type.version, type.plural);
    if (!a.type) return std::nullopt;
    a.name = collection ? "" : name;
    a.namespace_ = AdmissionNamespace(type, ns, name);
    a.user = ctx.effective_user();
    a.dry_run = ctx.dry_run;
    a.old_object = *current;
    a.options = options.is_object() ? options : Json::object();
    a.options["kind"] = "DeleteOptions";
    a.options["apiVersion"] = "meta.k8s.io/v1";
    if (ctx.dry_run) a.options["dryRun"] = {"All"};
    return a;
  };
  return AdmittedWrite(ctx, type, ns, name, mutator, review, WebhookConfigurations(type));
}

Reply KubeSim::Impl::Delete(Ctx& ctx) {
  const ResourceType& type = *ctx.type;
  ApiOr<Json> parsed = ReadDeleteOptions(ctx);
  if (!parsed.ok()) return Reply::Err(parsed.error());
  Json options = std::move(parsed.value());
  if (options.value("dryRun", Json::array()).is_array()) {
    for (const auto& d : options.value("dryRun", Json::array())) {
      if (d == "All") ctx.dry_run = true;
    }
  }
  const std::string& name = ctx.info.name;
  ApiOr<WriteResult> r = DeleteObject(ctx, type, ctx.info.namespace_, name, options);
  if (!r.ok()) return Reply::Err(r.error());
  if (!ctx.dry_run) AfterWrite(ctx, type, *r);
  if (!ctx.dry_run && type.group.empty() && type.plural == "namespaces" && r->event == "MODIFIED") {
    StartNamespaceDeletion(name);
    return Reply::Of(200, r->object);  // Terminating
  }
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
  ApiOr<Json> parsed = ReadDeleteOptions(ctx);
  if (!parsed.ok()) return Reply::Err(parsed.error());
  Json options = std::move(parsed.value());
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
        DeleteObject(ctx, type, m.value("namespace", ""), m.value("name", ""), options, true);
    if (!r.ok()) {
      if (r.error().code == 404) continue;  // raced with another delete
      return Reply::Err(r.error());         // e.g. an admission webhook denied this item
    }
    if (!ctx.dry_run) AfterWrite(ctx, type, *r);
    if (!ctx.dry_run && r->event == "DELETED") CollectGarbage(r->object, options);
    items.push_back(StripForList(r->object));
  }
  return Reply::Of(200, {{"kind", type.kind + "List"},
                         {"apiVersion", type.ApiVersion()},
                         {"metadata", {{"resourceVersion", std::to_string(store_.CurrentRv())}}},
                         {"items", items}});
}

}  // namespace reverser::kubesim
