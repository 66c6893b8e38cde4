#include "libs/membership/rendezvous.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace reverser::membership {
namespace {

constexpr uint64_t kPrime1 = 11400714785074694791ULL;
constexpr uint64_t kPrime2 = 14029467366897019727ULL;
constexpr uint64_t kPrime3 = 1609587929392839161ULL;
constexpr uint64_t kPrime4 = 9650029242287828579ULL;
constexpr uint64_t kPrime5 = 2870177450012600261ULL;

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian reads, whatever the host's byte order.
uint64_t Read64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Read32(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = Rotl(acc, 31);
  return acc * kPrime1;
}

uint64_t MergeRound(uint64_t acc, uint64_t val) {
  acc ^= Round(0, val);
  return acc * kPrime1 + kPrime4;
}

}  // namespace

uint64_t Xxh64(absl::string_view data, uint64_t seed) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const size_t len = data.size();
  const unsigned char* const end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v1 = seed + kPrime1 + kPrime2;
    uint64_t v2 = seed + kPrime2;
    uint64_t v3 = seed;
    uint64_t v4 = seed - kPrime1;
    const unsigned char* const limit = end - 32;
    do {
      v1 = Round(v1, Read64(p));
      v2 = Round(v2, Read64(p + 8));
      v3 = Round(v3, Read64(p + 16));
      v4 = Round(v4, Read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = Rotl(v1, 1) + Rotl(v2, 7) + Rotl(v3, 12) + Rotl(v4, 18);
    h = MergeRound(h, v1);
    h = MergeRound(h, v2);
    h = MergeRound(h, v3);
    h = MergeRound(h, v4);
  } else {
    h = seed + kPrime5;
  }
  h += static_cast<uint64_t>(len);
  while (end - p >= 8) {
    h ^= Round(0, Read64(p));
    h = Rotl(h, 27) * kPrime1 + kPrime4;
    p += 8;
  }
  if (end - p >= 4) {
    h ^= Read32(p) * kPrime1;
    h = Rotl(h, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * kPrime5;
    h = Rotl(h, 11) * kPrime1;
    ++p;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

uint64_t RendezvousWeight(absl::string_view unit_key, absl::string_view member) {
  // `<decimal length of member>:<member><unit>`: one hash over both, unambiguous.
  std::string key = absl::StrCat(member.size(), ":", member, unit_key);
  return Xxh64(key);
}

std::optional<std::string> Owner(absl::string_view unit_key,
                                 absl::Span<const std::string> members) {
  const std::string* best = nullptr;
  uint64_t best_weight = 0;
  for (const std::string& member : members) {
    const uint64_t w = RendezvousWeight(unit_key, member);
    if (best == nullptr || w > best_weight || (w == best_weight && member < *best)) {
      best = &member;
      best_weight = w;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::vector<std::string> OwnedUnits(absl::string_view member, absl::Span<const std::string> units,
                                    absl::Span<const std::string> members) {
  std::vector<std::string> owned;
  for (const std::string& unit : units) {
    std::optional<std::string> owner = Owner(unit, members);
    if (owner.has_value() && *owner == member) owned.push_back(unit);
  }
  return owned;
}

std::map<std::string, std::string> BoundedOwners(absl::Span<const std::string> units,
                                                 absl::Span<const std::string> members,
                                                 double load_factor) {
  std::map<std::string, std::string> owners;
  std::vector<std::string> distinct_members(members.begin(), members.end());
  std::sort(distinct_members.begin(), distinct_members.end());
  distinct_members.erase(std::unique(distinct_members.begin(), distinct_members.end()),
                         distinct_members.end());
  if (distinct_members.empty()) return owners;
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const std::string& unit : units) order.emplace_back(Xxh64(unit), unit);
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  const double per_member =
      std::max(1.0, load_factor) * static_cast<double>(order.size()) / distinct_members.size();
  const size_t cap = std::max<size_t>(1, static_cast<size_t>(std::ceil(per_member - 1e-9)));
  std::map<std::string, size_t> load;
  std::vector<std::pair<uint64_t, const std::string*>> ranked;
  for (const auto& [unit_hash, unit] : order) {
    ranked.clear();
    for (const std::string& member : distinct_members) {
      ranked.emplace_back(RendezvousWeight(unit, member), &member);
    }
    // Highest weight first; equal weights: the smaller id (members are sorted).
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [weight, member] : ranked) {
      if (load[*member] < cap) {
        ++load[*member];
        owners[unit] = *member;
        break;
      }
    }
  }
  return owners;
}

std::vector<UnitMove> UnitMoves(absl::Span<const std::string> units,
                                absl::Span<const std::string> before,
                                absl::Span<const std::string> after) {
  std::vector<UnitMove> moves;
  for (const std::string& unit : units) {
    std::string from = Owner(unit, before).value_or("");
    std::string to = Owner(unit, after).value_or("");
    if (from != to) moves.push_back({unit, std::move(from), std::move(to)});
  }
  return moves;
}

}  // namespace reverser::membership
