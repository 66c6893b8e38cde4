#include "libs/core/proto_convert.h"

namespace reverser::core {

reverser::v1::GroupVersionKind ToProto(const GroupVersionKind& gvk) {
  reverser::v1::GroupVersionKind out;
  out.set_group(gvk.group);
  out.set_version(gvk.version);
  out.set_kind(gvk.kind);
  return out;
}

GroupVersionKind FromProto(const reverser::v1::GroupVersionKind& gvk) {
  return {gvk.group(), gvk.version(), gvk.kind()};
}

reverser::v1::GroupVersionResource ToProto(const GroupVersionResource& gvr) {
  reverser::v1::GroupVersionResource out;
  out.set_group(gvr.group);
  out.set_version(gvr.version);
  out.set_resource(gvr.resource);
  return out;
}

GroupVersionResource FromProto(const reverser::v1::GroupVersionResource& gvr) {
  return {gvr.group(), gvr.version(), gvr.resource()};
}

reverser::v1::ResourceScope ToProto(Scope scope) {
  return scope == Scope::kCluster ? reverser::v1::RESOURCE_SCOPE_CLUSTER
                                  : reverser::v1::RESOURCE_SCOPE_NAMESPACED;
}

reverser::v1::WatchScope ToProto(const WatchScope& scope) {
  reverser::v1::WatchScope out;
  if (scope.IsCluster()) {
    out.set_cluster(true);
  } else {
    out.set_namespace_(scope.namespace_);
  }
  return out;
}

WatchScope FromProto(const reverser::v1::WatchScope& scope) {
  return scope.has_namespace_() ? WatchScope::Namespace(scope.namespace_()) : WatchScope::Cluster();
}

reverser::v1::ResourceRef ToProto(const ResourceRef& ref) {
  reverser::v1::ResourceRef out;
  *out.mutable_gvr() = ToProto(ref.gvr);
  out.set_namespace_(ref.namespace_);
  out.set_name(ref.name);
  out.set_uid(ref.uid);
  return out;
}

ResourceRef FromProto(const reverser::v1::ResourceRef& ref) {
  return {FromProto(ref.gvr()), ref.namespace_(), ref.name(), ref.uid()};
}

reverser::v1::StreamPosition ToProto(const StreamPosition& position) {
  reverser::v1::StreamPosition out;
  out.set_rv(position.rv());
  out.set_seq(position.seq());
  return out;
}

StreamPosition FromProto(const reverser::v1::StreamPosition& position) {
  return {position.rv(), position.seq()};
}

}  // namespace reverser::core
