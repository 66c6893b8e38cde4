#include "libs/membership/liveness.h"

#include <algorithm>

namespace reverser::membership {

LivenessTracker::Entry LivenessTracker::Judge(const LeaseRecord& lease, const Entry* previous,
                                              absl::Time now) const {
  Entry entry{lease, now, absl::InfinitePast()};
  if (!lease.Held()) return entry;
  const bool renewed = previous == nullptr || previous->lease.holder != lease.holder ||
                       previous->lease.renew_time_text != lease.renew_time_text ||
                       !previous->lease.Held();
  if (!renewed) {
    entry.observed_at = previous->observed_at;
  } else if (previous == nullptr || !previous->lease.Held()) {
    // First sight of this holding: not seen renewed yet, so its own renewTime bounds it.
    entry.observed_at = std::min(now, *lease.renew_time);
  } else {
    entry.observed_at = now;
  }
  entry.expires_at = entry.observed_at + absl::Seconds(lease.lease_duration_seconds) + grace_;
  return entry;
}

void LivenessTracker::Observe(const LeaseRecord& lease, absl::Time now) {
  auto it = entries_.find(lease.name);
  Entry entry = Judge(lease, it == entries_.end() ? nullptr : &it->second, now);
  entries_.insert_or_assign(lease.name, std::move(entry));
}

void LivenessTracker::Remove(absl::string_view lease_name) {
  entries_.erase(std::string(lease_name));
}

void LivenessTracker::Replace(const std::vector<LeaseRecord>& leases, absl::Time now) {
  std::map<std::string, Entry> next;
  for (const LeaseRecord& lease : leases) {
    auto it = entries_.find(lease.name);
    next.insert_or_assign(lease.name,
                          Judge(lease, it == entries_.end() ? nullptr : &it->second, now));
  }
  entries_ = std::move(next);
}

std::vector<Member> LivenessTracker::Live(absl::Time now) const {
  std::map<std::string, Member> by_replica;
  for (const auto& [name, entry] : entries_) {
    if (!(now < entry.expires_at)) continue;
    Member member{entry.lease.holder, entry.lease.address, entry.lease.name, entry.lease.renew_time,
                  entry.expires_at};
    auto [it, inserted] = by_replica.try_emplace(member.replica_id, member);
    if (!inserted && it->second.expires_at < member.expires_at) it->second = member;
  }
  std::vector<Member> out;
  out.reserve(by_replica.size());
  for (auto& [id, member] : by_replica) out.push_back(std::move(member));
  return out;
}

std::optional<absl::Time> LivenessTracker::NextExpiry(absl::Time now) const {
  std::optional<absl::Time> next;
  for (const auto& [name, entry] : entries_) {
    if (now < entry.expires_at && (!next.has_value() || entry.expires_at < *next)) {
      next = entry.expires_at;
    }
  }
  return next;
}

}  // namespace reverser::membership
