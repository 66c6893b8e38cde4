#include "libs/membership/ownership.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/membership/units.h"

namespace reverser::membership {
namespace {

Membership Members(std::vector<std::string> ids, bool synced = true) {
  Membership membership;
  membership.synced = synced;
  for (const std::string& id : ids) {
    Member member;
    member.replica_id = id;
    member.address = id + ":9090";
    member.lease_name = "gitworker-" + id;
    membership.members.push_back(member);
  }
  return membership;
}

std::vector<std::string> Branches(int n) {
  std::vector<std::string> units;
  for (int i = 0; i < n; ++i)
    units.push_back(BranchUnit("team", "github", "b" + std::to_string(i)));
  return units;
}

TEST(UnitsTest, NamesAreDistinctPerKind) {
  EXPECT_EQ(BranchUnit("ns", "p", "feature/x"), "branch:ns/p/feature/x");
  EXPECT_EQ(TargetUnit("ns", "t"), "target:ns/t");
  EXPECT_EQ(MaterializationUnit("apps/deployments", "cluster"), "mat:{apps/deployments:cluster}");
  EXPECT_EQ(MaterializationUnit("configmaps", "ns:team-a"), "mat:{configmaps:ns:team-a}");
}

TEST(OwnershipTableTest, OwnsNothingUntilSyncedAndSeeingItself) {
  OwnershipTable table("a");
  EXPECT_TRUE(table.SetUnits(Branches(5)).empty());
  EXPECT_TRUE(table.SetMembership(Members({"a"}, /*synced=*/false)).empty());
  EXPECT_FALSE(table.OwnerOf(Branches(1)[0]).has_value());
  // Synced, but its own Lease is not seen yet: the others would not count it either.
  EXPECT_TRUE(table.SetMembership(Members({"b"})).empty());
  EXPECT_EQ(table.OwnerOf(Branches(1)[0]), "b");
  OwnershipChange change = table.SetMembership(Members({"a"}));
  EXPECT_EQ(change.gained.size(), 5u);
  EXPECT_TRUE(change.lost.empty());
  EXPECT_TRUE(table.Owns(Branches(1)[0]));
  EXPECT_EQ(table.AddressOf("a"), "a:9090");
  EXPECT_FALSE(table.AddressOf("z").has_value());
}

TEST(OwnershipTableTest, ReplicasAgreeAndStayUnderTheBound) {
  std::vector<std::string> ids = {"gitworker-0", "gitworker-1", "gitworker-2"};
  std::vector<OwnershipTable> tables;
  for (const std::string& id : ids) tables.emplace_back(id);
  OwnershipTable router("");
  std::map<std::string, int> owners;
  for (OwnershipTable* table : {&tables[0], &tables[1], &tables[2], &router}) {
    table->SetUnits(Branches(30));
    table->SetMembership(Members(ids));
  }
  EXPECT_TRUE(router.owned().empty());
  size_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_LE(tables[i].owned().size(), 14u) << ids[i];
    total += tables[i].owned().size();
    for (const std::string& unit : tables[i].owned()) EXPECT_EQ(router.OwnerOf(unit), ids[i]);
  }
  EXPECT_EQ(total, 30u);  // every unit exactly once
}

TEST(OwnershipTableTest, ALeavingMembersUnitsAreGainedByTheOthers) {
  std::vector<std::string> ids = {"a", "b", "c"};
  OwnershipTable a("a"), b("b");
  for (OwnershipTable* table : {&a, &b}) {
    table->SetUnits(Branches(30));
    table->SetMembership(Members(ids));
  }
  size_t before = a.owned().size() + b.owned().size();
  OwnershipChange ca = a.SetMembership(Members({"a", "b"}));
  OwnershipChange cb = b.SetMembership(Members({"a", "b"}));
  EXPECT_EQ(a.owned().size() + b.owned().size(), 30u);
  EXPECT_EQ(ca.gained.size() + cb.gained.size() - ca.lost.size() - cb.lost.size(), 30u - before);
  // A removed unit is lost by its owner.
  std::vector<std::string> fewer = Branches(30);
  std::string gone = *a.owned().begin();
  fewer.erase(std::find(fewer.begin(), fewer.end(), gone));
  OwnershipChange shrink = a.SetUnits(fewer);
  EXPECT_NE(std::find(shrink.lost.begin(), shrink.lost.end(), gone), shrink.lost.end());
  EXPECT_FALSE(a.Owns(gone));
}

}  // namespace
}  // namespace reverser::membership
