#include "libs/membership/lease.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

namespace reverser::membership {
namespace {

bool IsDnsLabel(absl::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

// The string at `object[key]`, "" when absent or not a string.
std::string StringAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::optional<absl::Time> TimeAt(const nlohmann::json& spec, const char* key, std::string* text) {
  std::string value = StringAt(spec, key);
  if (text != nullptr) *text = value;
  if (value.empty()) return std::nullopt;
  absl::StatusOr<absl::Time> t = ParseMicroTime(value);
  if (!t.ok()) return std::nullopt;
  return *t;
}

int64_t IntegerAt(const nlohmann::json& spec, const char* key) {
  if (!spec.is_object()) return 0;
  auto it = spec.find(key);
  if (it == spec.end() || !it->is_number_integer()) return 0;
  return it->get<int64_t>();
}

}  // namespace

std::string LeaseNameFor(absl::string_view service, absl::string_view replica_id) {
  return absl::StrCat(service, "-", replica_id);
}

std::string MembershipSelector(absl::string_view service) {
  return absl::StrCat(kMembershipLabel, "=", service);
}

absl::Status MemberIdentity::Validate() const {
  if (!IsDnsLabel(service)) {
    return absl::InvalidArgumentError(
        absl::StrCat("membership: service \"", service,
                     "\" must be a DNS-1123 label (lower-case letters, digits, '-', at most 63)"));
  }
  if (replica_id.empty()) return absl::InvalidArgumentError("membership: empty replica id");
  RETURN_IF_ERROR(core::Annotate(core::ValidateNamespaceName(namespace_), "membership namespace"));
  return core::Annotate(core::ValidateObjectName(LeaseName()), "membership Lease name");
}

std::string MemberIdentity::LeaseName() const { return LeaseNameFor(service, replica_id); }

std::string FormatMicroTime(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", time, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseMicroTime(absl::string_view text) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an RFC 3339 time: \"", text, "\": ", error));
  }
  return t;
}

bool LeaseRecord::Held() const {
  return !holder.empty() && lease_duration_seconds > 0 && renew_time.has_value() && !deleting;
}

absl::StatusOr<LeaseRecord> ParseLease(const nlohmann::json& object) {
  if (!object.is_object()) return absl::InvalidArgumentError("Lease: not an object");
  auto meta_it = object.find("metadata");
  if (meta_it == object.end() || !meta_it->is_object()) {
    return absl::InvalidArgumentError("Lease: no metadata");
  }
  const nlohmann::json& meta = *meta_it;
  LeaseRecord record;
  record.name = StringAt(meta, "name");
  if (record.name.empty()) return absl::InvalidArgumentError("Lease: no metadata.name");
  record.namespace_ = StringAt(meta, "namespace");
  record.uid = StringAt(meta, "uid");
  record.resource_version = StringAt(meta, "resourceVersion");
  record.deleting = !StringAt(meta, "deletionTimestamp").empty();
  if (auto labels = meta.find("labels"); labels != meta.end()) {
    record.service = StringAt(*labels, kMembershipLabel);
  }
  if (auto annotations = meta.find("annotations"); annotations != meta.end()) {
    record.address = StringAt(*annotations, kAddressAnnotation);
  }
  auto spec_it = object.find("spec");
  if (spec_it == object.end() || !spec_it->is_object()) return record;
  const nlohmann::json& spec = *spec_it;
  record.holder = StringAt(spec, "holderIdentity");
  record.lease_duration_seconds = IntegerAt(spec, "leaseDurationSeconds");
  record.lease_transitions = IntegerAt(spec, "leaseTransitions");
  record.acquire_time = TimeAt(spec, "acquireTime", nullptr);
  record.renew_time = TimeAt(spec, "renewTime", &record.renew_time_text);
  if (!record.renew_time.has_value()) record.renew_time_text.clear();
  return record;
}

nlohmann::json LeaseBody(const MemberIdentity& identity, int64_t lease_duration_seconds,
                         absl::Time acquire_time, absl::Time renew_time, int64_t transitions,
                         absl::string_view resource_version) {
  nlohmann::json meta = {
      {"name", identity.LeaseName()},
      {"namespace", identity.namespace_},
      {"labels", {{kMembershipLabel, identity.service}}},
  };
  if (!identity.address.empty()) {
    meta["annotations"] = {{kAddressAnnotation, identity.address}};
  }
  if (!resource_version.empty()) meta["resourceVersion"] = std::string(resource_version);
  return {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", std::move(meta)},
      {"spec",
       {
           {"holderIdentity", identity.replica_id},
           {"leaseDurationSeconds", lease_duration_seconds},
           {"acquireTime", FormatMicroTime(acquire_time)},
           {"renewTime", FormatMicroTime(renew_time)},
           {"leaseTransitions", transitions},
       }},
  };
}

}  // namespace reverser::membership
