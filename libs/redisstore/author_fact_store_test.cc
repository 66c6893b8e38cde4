#include "libs/redisstore/author_fact_store.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/redisstore/test_redis.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {
namespace {

class AuthorFactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto connection = ConnectTo(*server_);
    ASSERT_TRUE(connection.ok()) << connection.status();
    redis_ = std::move(*connection);
    auto prefix = KeyPrefix::Parse("gitops-reverser");
    ASSERT_TRUE(prefix.ok());
    store_ = std::make_unique<AuthorFactStore>(redis_.get(), *prefix, absl::Minutes(10));
  }

  static AuthorFact Fact(std::string author, std::string uid, std::string rv,
                         std::string verb = "update") {
    AuthorFact fact;
    fact.group_resource = "configmaps";
    fact.namespace_ = "default";
    fact.name = "cfg";
    fact.uid = std::move(uid);
    fact.author = std::move(author);
    fact.verb = std::move(verb);
    fact.resource_version = std::move(rv);
    fact.audit_id = "audit-1";
    fact.stage_timestamp = "2026-11-29T10:00:00.123456789Z";
    fact.is_service_account = fact.author.rfind("system:serviceaccount:", 0) == 0;
    return fact;
  }

  AuthorResolution MustLookup(AuthorQuery query) {
    auto resolution = store_->Lookup(query);
    EXPECT_TRUE(resolution.ok()) << resolution.status();
    return resolution.ok() ? *resolution : AuthorResolution{};
  }

  int64_t Ttl(const std::string& key) {
    auto ttl = redis_->Command({"TTL", key});
    EXPECT_TRUE(ttl.ok());
    return ttl.ok() ? ttl->integer() : -3;
  }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisConnection> redis_;
  std::unique_ptr<AuthorFactStore> store_;
};

TEST_F(AuthorFactStoreTest, FactJsonUsesTheReferenceFieldNames) {
  AuthorFact fact = Fact("alice", "u1", "5");
  fact.display_name = "Alice";
  fact.email = "alice@example.com";
  fact.subresource = "scale";
  auto parsed = AuthorFact::FromJson(fact.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, fact);
  for (const char* field :
       {"groupResource", "namespace", "name", "uid", "author", "displayName", "email", "verb",
        "subresource", "auditID", "resourceVersion", "stageTimestamp", "isServiceAccount"}) {
    EXPECT_NE(fact.ToJson().find(std::string("\"") + field + "\":"), std::string::npos) << field;
  }
  // The same bytes nlohmann writes (and has always written) for the reference's fields.
  fact.author = "quote \" backslash \\ tab \t \x01 é";
  fact.is_service_account = true;
  const nlohmann::json reference = {{"groupResource", fact.group_resource},
                                    {"namespace", fact.namespace_},
                                    {"name", fact.name},
                                    {"uid", fact.uid},
                                    {"author", fact.author},
                                    {"displayName", fact.display_name},
                                    {"email", fact.email},
                                    {"verb", fact.verb},
                                    {"subresource", fact.subresource},
                                    {"auditID", fact.audit_id},
                                    {"resourceVersion", fact.resource_version},
                                    {"stageTimestamp", fact.stage_timestamp},
                                    {"isServiceAccount", fact.is_service_account}};
  EXPECT_EQ(fact.ToJson(), reference.dump());
  EXPECT_EQ(AuthorFact{}.ToJson(), nlohmann::json({{"groupResource", ""},
                                                   {"namespace", ""},
                                                   {"name", ""},
                                                   {"uid", ""},
                                                   {"author", ""},
                                                   {"displayName", ""},
                                                   {"email", ""},
                                                   {"verb", ""},
                                                   {"subresource", ""},
                                                   {"auditID", ""},
                                                   {"resourceVersion", ""},
                                                   {"stageTimestamp", ""},
                                                   {"isServiceAccount", false}})
                                       .dump());
  // Written by another implementation: missing fields are fine, wrong types are not.
  auto sparse = AuthorFact::FromJson(R"({"author":"bob","uid":"u"})");
  ASSERT_TRUE(sparse.ok());
  EXPECT_EQ(sparse->author, "bob");
  EXPECT_FALSE(AuthorFact::FromJson(R"({"author":7})").ok());
  EXPECT_FALSE(AuthorFact::FromJson(R"({"isServiceAccount":"yes"})").ok());
  EXPECT_FALSE(AuthorFact::FromJson("[1,2]").ok());
  EXPECT_FALSE(AuthorFact::FromJson("{").ok());
}

TEST_F(AuthorFactStoreTest, RecordWritesTheReferenceKeysWithTtl) {
  ASSERT_TRUE(store_->Record(Fact("alice", "u:1", "100")).ok());
  const std::string exact = "gitops-reverser:author:v1:audit:configmaps:object:u%3A1:100";
  const std::string last = "gitops-reverser:author:v1:audit:configmaps:object:u%3A1:last";
  auto stored = redis_->Command({"GET", exact});
  ASSERT_TRUE(stored.ok());
  ASSERT_FALSE(stored->IsNil());
  EXPECT_EQ(AuthorFact::FromJson(stored->str())->author, "alice");
  EXPECT_GT(Ttl(exact), 500);
  EXPECT_LE(Ttl(exact), 600);
  EXPECT_GT(Ttl(last), 500);
  // A UID-bearing fact never writes the rv: hatch.
  EXPECT_EQ(Ttl("gitops-reverser:author:v1:audit:configmaps:rv:100"), -2);

  // A UID-less fact goes only to the rv: hatch.
  ASSERT_TRUE(store_->Record(Fact("bob", "", "200")).ok());
  EXPECT_GT(Ttl("gitops-reverser:author:v1:audit:configmaps:rv:200"), 500);
  // A uid without an RV: only :last.
  ASSERT_TRUE(store_->Record(Fact("carol", "u2", "")).ok());
  EXPECT_GT(Ttl("gitops-reverser:author:v1:audit:configmaps:object:u2:last"), 500);
  auto count = store_->CountFacts();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 4);

  EXPECT_EQ(store_->Record(Fact("", "u", "1")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Record(Fact("dave", "", "")).code(), absl::StatusCode::kInvalidArgument);
  AuthorFact no_gr = Fact("dave", "u", "1");
  no_gr.group_resource.clear();
  EXPECT_EQ(store_->Record(no_gr).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AuthorFactStoreTest, EveryRecordedFactSignalsItsType) {
  auto none = store_->LatestSignal("configmaps");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, "0-0");
  ASSERT_TRUE(store_->Record(Fact("alice", "u1", "100")).ok());
  auto first = store_->LatestSignal("configmaps");
  ASSERT_TRUE(first.ok());
  EXPECT_NE(*first, "0-0");
  ASSERT_TRUE(store_->Record(Fact("bob", "u2", "101")).ok());
  auto second = store_->LatestSignal("configmaps");
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, *first);
  // Signals are per type and are not facts.
  auto other = store_->LatestSignal("secrets");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*other, "0-0");
  auto count = store_->CountFacts();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 4);
}

TEST_F(AuthorFactStoreTest, RecordAllWritesABatchAndSkipsUnkeyableFacts) {
  AuthorFact other_type = Fact("erin", "u9", "300");
  other_type.group_resource = "apps/deployments";
  std::vector<AuthorFact> batch = {Fact("alice", "u1", "100"),
                                   Fact("dave", "", ""),
                                   Fact("bob", "", "200"),
                                   Fact("", "u3", "1"),
                                   Fact("carol", "u2", "", "deletecollection"),
                                   other_type};
  auto recorded = store_->RecordAll(batch);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ(*recorded, 4u);
  // The same keys one Record per fact would write.
  for (const char* key : {"gitops-reverser:author:v1:audit:configmaps:object:u1:100",
                          "gitops-reverser:author:v1:audit:configmaps:object:u1:last",
                          "gitops-reverser:author:v1:audit:configmaps:rv:200",
                          "gitops-reverser:author:v1:audit:configmaps:object:u2:last",
                          "gitops-reverser:author:v1:audit:apps/deployments:object:u9:300",
                          "gitops-reverser:author:v1:audit:apps/deployments:object:u9:last"}) {
    EXPECT_GT(Ttl(key), 500) << key;
  }
  auto count = store_->CountFacts();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 6);
  // One wake-up per type in the batch.
  for (const char* type : {"configmaps", "apps/deployments"}) {
    auto signal = store_->LatestSignal(type);
    ASSERT_TRUE(signal.ok());
    EXPECT_NE(*signal, "0-0") << type;
  }
  auto signals = redis_->Command({"XLEN", "gitops-reverser:author:v1:recorded:configmaps"});
  ASSERT_TRUE(signals.ok());
  EXPECT_EQ(signals->integer(), 1);

  // Nothing keyable: no round trip, nothing written.
  auto none = store_->RecordAll({Fact("dave", "", "")});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
}

// `--reference_key_prefix=gitops-reverser` with reverser's default `--redis_key_prefix`: the
// fact and command-author keys in Redis are exactly the reference's (its v0.36.0 key schema:
// `gitops-reverser:author:v1:audit:<GR>:object:<uid>:<rv>|last`, `…:<GR>:rv:<rv>`,
// `gitops-reverser:author:v1:command:<uid>`, uid/rv escaped `%`->`%25`, `:`->`%3A`), found and
// read back by lookups; only reverser's wake-up stream stays under `reverser`.
TEST_F(AuthorFactStoreTest, TheReferencePrefixWritesTheReferencesKeysExactly) {
  auto prefix = KeyPrefix::Parse(KeyPrefix::kDefault, KeyPrefix::kReferenceDefault);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  AuthorFactStore store(redis_.get(), *prefix, absl::Minutes(10));
  AuthorFact deployment = Fact("erin", "d:1%", "77");
  deployment.group_resource = "apps/deployments";
  ASSERT_TRUE(store
                  .RecordAll({Fact("alice", "3f1e2c4d-0000-4000-8000-00000000beef", "48213"),
                              Fact("bob", "", "9:9"), deployment,
                              Fact("carol", "u2", "", "deletecollection")})
                  .ok());
  ASSERT_TRUE(store.RecordCommandAuthor("cr-1", {"dave", "", "", "2026-11-29T10:00:00Z"}).ok());

  auto keys = redis_->Command({"KEYS", "*"});
  ASSERT_TRUE(keys.ok());
  auto listed = keys->AsStringArray();
  ASSERT_TRUE(listed.ok());
  std::set<std::string> written(listed->begin(), listed->end());
  const std::set<std::string> reference = {
      "gitops-reverser:author:v1:audit:configmaps:object:3f1e2c4d-0000-4000-8000-00000000beef:"
      "48213",
      "gitops-reverser:author:v1:audit:configmaps:object:3f1e2c4d-0000-4000-8000-00000000beef:"
      "last",
      "gitops-reverser:author:v1:audit:configmaps:rv:9%3A9",
      "gitops-reverser:author:v1:audit:apps/deployments:object:d%3A1%25:77",
      "gitops-reverser:author:v1:audit:apps/deployments:object:d%3A1%25:last",
      "gitops-reverser:author:v1:audit:configmaps:object:u2:last",
      "gitops-reverser:author:v1:command:cr-1",
  };
  const std::set<std::string> ours = {"reverser:author:v1:recorded:configmaps",
                                      "reverser:author:v1:recorded:apps/deployments"};
  std::set<std::string> expected = reference;
  expected.insert(ours.begin(), ours.end());
  EXPECT_EQ(written, expected);
  for (const std::string& key : reference) {
    if (key.find(":command:") == std::string::npos) {
      EXPECT_GT(Ttl(key), 500) << key;
    }
  }
  EXPECT_GT(Ttl("gitops-reverser:author:v1:command:cr-1"), 3500);

  auto count = store.CountFacts();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 6);
  auto exact = store.Lookup({"apps/deployments", "d:1%", "77", true});
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->code, AuthorResolutionCode::kExactUser);
  EXPECT_EQ(exact->fact->author, "erin");
  auto signal = store.LatestSignal("apps/deployments");
  ASSERT_TRUE(signal.ok());
  EXPECT_NE(*signal, "0-0");
  auto command = store.LookupCommandAuthor("cr-1");
  ASSERT_TRUE(command.ok() && command->has_value());
  EXPECT_EQ((*command)->author, "dave");
}

TEST_F(AuthorFactStoreTest, ExactMatchesNameUserOrServiceAccount) {
  ASSERT_TRUE(store_->Record(Fact("alice", "u1", "10")).ok());
  ASSERT_TRUE(store_->Record(Fact("system:serviceaccount:kube-system:ctrl", "u1", "11")).ok());
  auto user = MustLookup({"configmaps", "u1", "10", true});
  EXPECT_EQ(user.code, AuthorResolutionCode::kExactUser);
  EXPECT_EQ(user.fact->author, "alice");
  auto sa = MustLookup({"configmaps", "u1", "11", true});
  EXPECT_EQ(sa.code, AuthorResolutionCode::kExactServiceAccount);
  EXPECT_EQ(AuthorResolutionCodeName(sa.code), "exact_serviceaccount");
  // Another type with the same uid and RV is a different key.
  EXPECT_EQ(MustLookup({"secrets", "u1", "10", true}).code, AuthorResolutionCode::kAbsent);
}

TEST_F(AuthorFactStoreTest, ExactCapableEventsNeverReadLast) {
  // :last names whoever wrote u1 last (bob at 11), not the author of RV 12.
  ASSERT_TRUE(store_->Record(Fact("alice", "u1", "10")).ok());
  ASSERT_TRUE(store_->Record(Fact("bob", "u1", "11")).ok());
  auto modified = MustLookup({"configmaps", "u1", "12", true});
  EXPECT_EQ(modified.code, AuthorResolutionCode::kAbsent);
  EXPECT_FALSE(modified.fact.has_value());
  // A removal is never credited to a fact that records no removal: not to bob, who wrote u1
  // last, nor to alice's write at the same RV.
  EXPECT_EQ(MustLookup({"configmaps", "u1", "12", false}).code, AuthorResolutionCode::kAbsent);
  EXPECT_EQ(MustLookup({"configmaps", "u1", "10", false}).code, AuthorResolutionCode::kAbsent);
  // Once carol's delete is recorded, :last names her (weak) and her exact fact is exact.
  ASSERT_TRUE(store_->Record(Fact("carol", "u1", "13", "delete")).ok());
  auto removal = MustLookup({"configmaps", "u1", "14", false});
  EXPECT_EQ(removal.code, AuthorResolutionCode::kWeak);
  EXPECT_EQ(removal.fact->author, "carol");
  auto exact_removal = MustLookup({"configmaps", "u1", "13", false});
  EXPECT_EQ(exact_removal.code, AuthorResolutionCode::kExactUser);
  EXPECT_EQ(exact_removal.fact->author, "carol");
}

TEST_F(AuthorFactStoreTest, RvHatchIsTheLastResortForAllEvents) {
  ASSERT_TRUE(store_->Record(Fact("erin", "", "77")).ok());
  auto hatch = MustLookup({"configmaps", "unknown-uid", "77", true});
  EXPECT_EQ(hatch.code, AuthorResolutionCode::kWeak);
  EXPECT_EQ(hatch.fact->author, "erin");
  // For a removal the hatch too must record a removal.
  EXPECT_EQ(MustLookup({"configmaps", "", "77", false}).code, AuthorResolutionCode::kAbsent);
  ASSERT_TRUE(store_->Record(Fact("erin", "", "78", "delete")).ok());
  auto removal = MustLookup({"configmaps", "", "78", false});
  EXPECT_EQ(removal.code, AuthorResolutionCode::kWeak);
  EXPECT_EQ(MustLookup({"configmaps", "", "", false}).code, AuthorResolutionCode::kAbsent);
}

TEST_F(AuthorFactStoreTest, DeleteCollectionItemsCreditTheCollectionActor) {
  ASSERT_TRUE(store_->Record(Fact("frank", "item-1", "300", "deletecollection")).ok());
  // Only :last is written for an item.
  EXPECT_EQ(Ttl("gitops-reverser:author:v1:audit:configmaps:object:item-1:300"), -2);
  auto removal = MustLookup({"configmaps", "item-1", "301", false});
  EXPECT_EQ(removal.code, AuthorResolutionCode::kExactDeleteCollectionItem);
  EXPECT_EQ(AuthorResolutionCodeName(removal.code), "exact_deletecollection_item");
  EXPECT_EQ(removal.fact->author, "frank");
}

// Attribution from admission: who asked for a change, keyed by what the stream entry can name.
class AdmissionFactTest : public AuthorFactStoreTest {
 protected:
  static AdmissionFact Admitted(AdmissionChange change, std::string author, std::string request_uid,
                                std::string old_rv = "") {
    AdmissionFact admitted;
    admitted.change = change;
    admitted.request_uid = std::move(request_uid);
    admitted.old_resource_version = std::move(old_rv);
    const char* verb = change == AdmissionChange::kCreate   ? "create"
                       : change == AdmissionChange::kDelete ? "delete"
                                                            : "update";
    admitted.fact = Fact(std::move(author), "obj-1", "", verb);
    admitted.fact.audit_id.clear();
    return admitted;
  }
  static AuthorQuery Query(std::string rv, std::string previous_rv, bool created = false,
                           bool removal = false) {
    AuthorQuery query;
    query.group_resource = "configmaps";
    query.uid = "obj-1";
    query.resource_version = std::move(rv);
    query.previous_resource_version = std::move(previous_rv);
    query.created = created;
    query.exact_capable = !removal;
    query.namespace_ = "default";
    query.use_admission = true;
    return query;
  }
};

TEST_F(AdmissionFactTest, AnUpdateIsCreditedByTheVersionItWasAdmittedAgainst) {
  ASSERT_TRUE(
      store_->RecordAdmission(Admitted(AdmissionChange::kUpdate, "alice", "r1", "10")).ok());
  EXPECT_EQ(Ttl("gitops-reverser:author:v1:admission:configmaps:update:obj-1:10"), 600);
  AuthorResolution found = MustLookup(Query("11", "10"));
  EXPECT_EQ(found.code, AuthorResolutionCode::kAdmission);
  EXPECT_EQ(AuthorResolutionCodeName(found.code), "admission");
  ASSERT_TRUE(found.fact.has_value());
  EXPECT_EQ(found.fact->author, "alice");
  // Another predecessor, an unknown predecessor, or admission not asked for: no one.
  EXPECT_EQ(MustLookup(Query("12", "11")).code, AuthorResolutionCode::kAbsent);
  EXPECT_EQ(MustLookup(Query("11", "")).code, AuthorResolutionCode::kAbsent);
  AuthorQuery audit_only = Query("11", "10");
  audit_only.use_admission = false;
  EXPECT_EQ(MustLookup(audit_only).code, AuthorResolutionCode::kAbsent);
}

TEST_F(AdmissionFactTest, TwoUsersAdmittedForOneChangeAreAmbiguousNotGuessed) {
  ASSERT_TRUE(
      store_->RecordAdmission(Admitted(AdmissionChange::kUpdate, "alice", "r1", "10")).ok());
  // A resent review (same request uid) and a second request of the same user stay hers.
  ASSERT_TRUE(
      store_->RecordAdmission(Admitted(AdmissionChange::kUpdate, "alice", "r1", "10")).ok());
  ASSERT_TRUE(
      store_->RecordAdmission(Admitted(AdmissionChange::kUpdate, "alice", "r2", "10")).ok());
  EXPECT_EQ(MustLookup(Query("11", "10")).fact->author, "alice");
  ASSERT_TRUE(store_->RecordAdmission(Admitted(AdmissionChange::kUpdate, "bob", "r3", "10")).ok());
  AuthorResolution raced = MustLookup(Query("11", "10"));
  EXPECT_EQ(raced.code, AuthorResolutionCode::kAmbiguous);
  EXPECT_FALSE(raced.fact.has_value());
}

TEST_F(AdmissionFactTest, CreatesAndDeletesAreCreditedByUid) {
  ASSERT_TRUE(store_->RecordAdmission(Admitted(AdmissionChange::kCreate, "carol", "r1")).ok());
  ASSERT_TRUE(store_->RecordAdmission(Admitted(AdmissionChange::kDelete, "dave", "r2")).ok());
  EXPECT_EQ(MustLookup(Query("5", "", /*created=*/true)).fact->author, "carol");
  // A removal (DELETED, or deletionTimestamp set) reads only the delete's fact.
  EXPECT_EQ(MustLookup(Query("9", "8", false, /*removal=*/true)).fact->author, "dave");
  // A MODIFIED entry is neither.
  EXPECT_EQ(MustLookup(Query("9", "")).code, AuthorResolutionCode::kAbsent);
}

TEST_F(AdmissionFactTest, TheAuditFactWinsWhenBothExist) {
  ASSERT_TRUE(store_->Record(Fact("erin", "obj-1", "11")).ok());
  ASSERT_TRUE(
      store_->RecordAdmission(Admitted(AdmissionChange::kUpdate, "mallory", "r1", "10")).ok());
  AuthorResolution found = MustLookup(Query("11", "10"));
  EXPECT_EQ(found.code, AuthorResolutionCode::kExactUser);
  EXPECT_EQ(found.fact->author, "erin");
}

TEST_F(AdmissionFactTest, UnusableAdmissionFactsAreRefused) {
  AdmissionFact no_old_rv = Admitted(AdmissionChange::kUpdate, "alice", "r1");
  EXPECT_TRUE(absl::IsInvalidArgument(store_->RecordAdmission(no_old_rv)));
  AdmissionFact no_request = Admitted(AdmissionChange::kCreate, "alice", "");
  EXPECT_TRUE(absl::IsInvalidArgument(store_->RecordAdmission(no_request)));
  AdmissionFact no_uid = Admitted(AdmissionChange::kCreate, "alice", "r2");
  no_uid.fact.uid.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(store_->RecordAdmission(no_uid)));
}

TEST_F(AdmissionFactTest, ANamespaceCascadeIsCreditedToTheNamespacesDeleter) {
  // The controller's deletecollection, recorded from the audit log: not yet creditable.
  ASSERT_TRUE(
      store_->Record(Fact(std::string(kNamespaceControllerUser), "obj-1", "20", "deletecollection"))
          .ok());
  AuthorResolution waiting = MustLookup(Query("21", "20", false, /*removal=*/true));
  EXPECT_EQ(waiting.code, AuthorResolutionCode::kAbsent);
  EXPECT_TRUE(waiting.awaiting_namespace_deletion);
  // Whoever deleted the namespace (audit or admission) is credited.
  AuthorFact namespace_delete = Fact("grace", "ns-uid", "19", "delete");
  namespace_delete.group_resource = "namespaces";
  namespace_delete.namespace_.clear();
  namespace_delete.name = "default";
  ASSERT_TRUE(store_->Record(namespace_delete).ok());
  EXPECT_EQ(Ttl("gitops-reverser:author:v1:namespace-deletion:default"), 600);
  AuthorResolution credited = MustLookup(Query("21", "20", false, /*removal=*/true));
  EXPECT_EQ(credited.code, AuthorResolutionCode::kNamespaceDeletion);
  EXPECT_EQ(credited.fact->author, "grace");
  // The same through an admission fact of the controller's per-item DELETE.
  ASSERT_TRUE(
      redis_->Command({"DEL", "gitops-reverser:author:v1:audit:configmaps:object:obj-1:last"})
          .ok());
  AdmissionFact item =
      Admitted(AdmissionChange::kDelete, std::string(kNamespaceControllerUser), "r9");
  ASSERT_TRUE(store_->RecordAdmission(item).ok());
  EXPECT_EQ(MustLookup(Query("21", "20", false, true)).fact->author, "grace");
}

TEST_F(AuthorFactStoreTest, UnreadableFactsAreSkippedNotFatal) {
  ASSERT_TRUE(
      redis_->Command({"SET", "gitops-reverser:author:v1:audit:configmaps:object:u9:5", "{garbage"})
          .ok());
  ASSERT_TRUE(store_->Record(Fact("gina", "", "5")).ok());
  auto resolution = MustLookup({"configmaps", "u9", "5", true});
  EXPECT_EQ(resolution.code, AuthorResolutionCode::kWeak);
  EXPECT_EQ(resolution.fact->author, "gina");
}

TEST_F(AuthorFactStoreTest, FactsAgeOut) {
  auto short_lived = AuthorFactStore(redis_.get(), KeyPrefix::Default(), absl::Milliseconds(1));
  ASSERT_TRUE(short_lived.Record(Fact("hank", "u", "1")).ok());
  // TTL rounds up to one second (Redis EX granularity), never zero.
  EXPECT_EQ(Ttl("reverser:author:v1:audit:configmaps:object:u:1"), 1);
}

TEST_F(AuthorFactStoreTest, CommandAuthorRoundTrip) {
  EXPECT_FALSE(store_->LookupCommandAuthor("cr-1")->has_value());
  CommandAuthor author{"alice", "Alice", "", "2026-11-29T10:00:00Z"};
  ASSERT_TRUE(store_->RecordCommandAuthor("cr-1", author).ok());
  auto stored = redis_->Command({"GET", "gitops-reverser:author:v1:command:cr-1"});
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->str(),
            R"({"author":"alice","displayName":"Alice","requestedAt":"2026-11-29T10:00:00Z"})");
  EXPECT_GT(Ttl("gitops-reverser:author:v1:command:cr-1"), 3500);
  auto read = store_->LookupCommandAuthor("cr-1");
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->display_name, "Alice");
  EXPECT_FALSE(store_->RecordCommandAuthor("", author).ok());
}

}  // namespace
}  // namespace reverser::redisstore
