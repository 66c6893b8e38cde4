// GET and LIST of resources (and the scale subresource view).

#include "tools/kube-sim/server_internal.h"

namespace reverser::kubesim {

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
  ApiOr<Store::StoredSnapshot> snap = store_.ListStored(type.Key(), ctx.info.namespace_, at);
  if (!snap.ok()) return Reply::Err(snap.error());
  int64_t limit = 0;
  if (ctx.Has("limit") && !absl::SimpleAtoi(ctx.Param("limit"), &limit)) limit = 0;
  std::vector<const Json*> page;
  int64_t remaining = 0;
  for (const auto& stored : snap->items) {
    const Json& o = stored->value;
    if (!start.empty() && ObjectKeyOf(o) < start) continue;
    if (!labels->Matches(o) || !fields->Matches(o)) continue;
    if (limit > 0 && static_cast<int64_t>(page.size()) >= limit) {
      ++remaining;
      continue;
    }
    page.push_back(&o);
  }
  Json meta = {{"resourceVersion", std::to_string(snap->rv)}};
  if (remaining > 0) {
    meta["continue"] = EncodeContinue(snap->rv, ObjectKeyOf(*page.back()) + std::string(1, '\x01'));
    // A label/field selector makes the count unknowable cheaply; real servers omit it then.
    if (labels->empty() && fields->empty()) meta["remainingItemCount"] = remaining;
  }
  // The body is written straight from the stored objects: the same bytes as dumping the list
  // object below (keys in nlohmann's order: apiVersion, items, kind, metadata), without
  // building it. Only an audit that records response bodies needs the object itself.
  Reply r;
  r.code = 200;
  absl::StrAppend(&r.raw, R"({"apiVersion":)", Json(type.ApiVersion()).dump(), R"(,"items":[)");
  for (size_t i = 0; i < page.size(); ++i) {
    if (i > 0) r.raw += ',';
    AppendStrippedForList(r.raw, *page[i]);
  }
  absl::StrAppend(&r.raw, R"(],"kind":)", Json(type.kind + "List").dump(), R"(,"metadata":)",
                  meta.dump(), "}");
  if (audit_ && ctx.audit.level == AuditLevel::kRequestResponse) {
    Json items = Json::array();
    for (const Json* o : page) items.push_back(StripForList(*o));
    r.object = {{"kind", type.kind + "List"},
                {"apiVersion", type.ApiVersion()},
                {"metadata", std::move(meta)},
                {"items", std::move(items)}};
  }
  return r;
}

}  // namespace reverser::kubesim
