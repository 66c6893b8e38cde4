#include "libs/rules/proto_convert.h"

#include "libs/core/proto_convert.h"

namespace reverser::rules {
namespace {

reverser::v1::Operation ToProto(Operation op) {
  switch (op) {
    case Operation::kCreate:
      return reverser::v1::OPERATION_CREATE;
    case Operation::kUpdate:
      return reverser::v1::OPERATION_UPDATE;
    case Operation::kDelete:
      return reverser::v1::OPERATION_DELETE;
  }
  return reverser::v1::OPERATION_UNSPECIFIED;
}

reverser::v1::TypeIdentity Identity(const core::GroupVersionKind& gvk,
                                    const core::GroupVersionResource& gvr, core::Scope scope) {
  reverser::v1::TypeIdentity out;
  *out.mutable_gvk() = core::ToProto(gvk);
  *out.mutable_gvr() = core::ToProto(gvr);
  out.set_scope(core::ToProto(scope));
  return out;
}

core::Scope ScopeFromProto(reverser::v1::ResourceScope scope) {
  return scope == reverser::v1::RESOURCE_SCOPE_CLUSTER ? core::Scope::kCluster
                                                       : core::Scope::kNamespaced;
}

}  // namespace

reverser::v1::OperationSet ToProto(const OperationSet& ops) {
  reverser::v1::OperationSet out;
  out.set_all(ops.all);
  for (Operation op : ops.operations) out.add_operations(ToProto(op));
  return out;
}

reverser::v1::GitTargetRef ToProto(const GitTargetInfo& target) {
  reverser::v1::GitTargetRef out;
  out.set_namespace_(target.key.namespace_);
  out.set_name(target.key.name);
  out.set_uid(target.uid);
  return out;
}

reverser::v1::GitDestination ToProto(const GitDestination& d) {
  reverser::v1::GitDestination out;
  out.set_provider_namespace(d.provider_namespace);
  out.set_provider_name(d.provider_name);
  out.set_branch(d.branch);
  out.set_path(d.path);
  return out;
}

reverser::v1::WatchedType ToProto(const WatchedType& type) {
  reverser::v1::WatchedType out;
  *out.mutable_type() = Identity(type.gvk, type.gvr, type.scope);
  for (const auto& [ns, ops] : type.namespaces) (*out.mutable_namespaces())[ns] = ToProto(ops);
  out.set_sensitive(type.sensitive);
  return out;
}

reverser::v1::WatchedTypeTable ToProto(const WatchedTypeTable& table) {
  reverser::v1::WatchedTypeTable out;
  *out.mutable_target() = ToProto(table.target);
  *out.mutable_destination() = ToProto(table.target.destination);
  for (const auto& [gvr, type] : table.types) *out.add_types() = ToProto(type);
  out.set_registry_generation(table.registry_revision);
  out.set_plan_hash(table.plan_hash);
  return out;
}

reverser::v1::Claim ToProto(const Claim& claim) {
  reverser::v1::Claim out;
  *out.mutable_type() = Identity(claim.gvk, claim.gvr, claim.type_scope);
  *out.mutable_scope() = core::ToProto(claim.scope);
  out.set_sensitive(claim.sensitive);
  return out;
}

reverser::v1::ClaimSet ToProto(const std::vector<Claim>& claims, uint64_t generation) {
  reverser::v1::ClaimSet out;
  out.set_generation(generation);
  for (const Claim& claim : claims) *out.add_claims() = ToProto(claim);
  return out;
}

OperationSet FromProto(const reverser::v1::OperationSet& ops) {
  if (ops.all()) return OperationSet::All();
  OperationSet out;
  for (int op : ops.operations()) {
    if (op == reverser::v1::OPERATION_CREATE) out.operations.insert(Operation::kCreate);
    if (op == reverser::v1::OPERATION_UPDATE) out.operations.insert(Operation::kUpdate);
    if (op == reverser::v1::OPERATION_DELETE) out.operations.insert(Operation::kDelete);
  }
  if (out.operations.size() == 3) return OperationSet::All();
  return out;
}

WatchedType FromProto(const reverser::v1::WatchedType& type) {
  WatchedType out;
  out.gvk = core::FromProto(type.type().gvk());
  out.gvr = core::FromProto(type.type().gvr());
  out.scope = ScopeFromProto(type.type().scope());
  for (const auto& [ns, ops] : type.namespaces()) out.namespaces[ns] = FromProto(ops);
  out.sensitive = type.sensitive();
  return out;
}

WatchedTypeTable FromProto(const reverser::v1::WatchedTypeTable& table) {
  WatchedTypeTable out;
  out.target.key = {table.target().namespace_(), table.target().name()};
  out.target.uid = table.target().uid();
  const auto& d = table.destination();
  out.target.destination = {d.provider_namespace(), d.provider_name(), d.branch(), d.path()};
  for (const auto& type : table.types()) {
    WatchedType w = FromProto(type);
    core::GroupVersionResource gvr = w.gvr;
    out.types.insert_or_assign(std::move(gvr), std::move(w));
  }
  out.registry_revision = table.registry_generation();
  out.plan_hash = table.plan_hash();
  return out;
}

Claim FromProto(const reverser::v1::Claim& claim) {
  return {core::FromProto(claim.type().gvk()), core::FromProto(claim.type().gvr()),
          ScopeFromProto(claim.type().scope()), core::FromProto(claim.scope()), claim.sensitive()};
}

std::vector<Claim> FromProto(const reverser::v1::ClaimSet& claims) {
  std::vector<Claim> out;
  for (const auto& claim : claims.claims()) out.push_back(FromProto(claim));
  return out;
}

}  // namespace reverser::rules
