#include "libs/membership/membership.h"

namespace reverser::membership {

std::vector<std::string> Membership::ReplicaIds() const {
  std::vector<std::string> ids;
  ids.reserve(members.size());
  for (const Member& m : members) ids.push_back(m.replica_id);
  return ids;
}

const Member* Membership::Find(const std::string& replica_id) const {
  for (const Member& m : members) {
    if (m.replica_id == replica_id) return &m;
  }
  return nullptr;
}

}  // namespace reverser::membership
