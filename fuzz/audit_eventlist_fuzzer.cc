// The audit webhook's decoder (libs/audit): a POSTed body is untrusted. Every body either decodes
// or is refused with a Status; every decoded event goes through what the webhook does with it
// (filters, effective actor, author facts), and every fact survives its Redis encoding.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "libs/audit/audit_event.h"
#include "libs/redisstore/author_fact_store.h"

namespace reverser::fuzz {
namespace {

void ReadIdentity(const audit::ObjectIdentity& identity) {
  ReadAll(identity.name);
  ReadAll(identity.namespace_);
  ReadAll(identity.uid);
  ReadAll(identity.resource_version);
}

void ReadEmbedded(const audit::EmbeddedObject& object) {
  ReadAll(object.kind);
  ReadAll(object.api_version);
  ReadIdentity(object.metadata);
  ReadAll(object.details_name);
  ReadAll(object.details_uid);
  for (const audit::ObjectIdentity& item : object.items) ReadIdentity(item);
  ReadAll(object.json);
  FUZZ_CHECK(object.present || object.json.empty());
}

void Exercise(const audit::AuditEvent& event) {
  ReadAll(event.stage);
  ReadAll(event.verb);
  ReadAll(event.audit_id);
  ReadAll(event.stage_timestamp);
  ReadAll(event.request_uri);
  const audit::ObjectReference& ref = event.object_ref;
  for (absl::string_view field : {ref.resource, ref.api_group, ref.api_version, ref.namespace_,
                                  ref.name, ref.uid, ref.resource_version, ref.subresource}) {
    ReadAll(field);
  }
  for (const audit::UserInfo* user : {&event.user, &event.impersonated_user}) {
    ReadAll(user->username);
    ReadAll(user->display_name);
    ReadAll(user->email);
  }
  ReadEmbedded(event.request_object);
  ReadEmbedded(event.response_object);

  const audit::Outcome outcome = audit::Classify(event);
  FUZZ_CHECK(!audit::OutcomeLabel(outcome).empty());
  FUZZ_CHECK(!audit::OutcomeCategory(outcome).empty());
  const audit::Actor actor = audit::EffectiveActor(event);
  ReadAll(actor.username);
  if (outcome != audit::Outcome::kQueued) return;
  for (const redisstore::AuthorFact& fact : audit::ExtractFacts(event)) {
    // What the webhook stores must read back as the same fact.
    auto read_back = redisstore::AuthorFact::FromJson(fact.ToJson());
    FUZZ_CHECK(read_back.ok());
    FUZZ_CHECK(*read_back == fact);
  }
}

}  // namespace
}  // namespace reverser::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  const std::string body(reinterpret_cast<const char*>(data), size);
  if (auto list = audit::ParseEventList(body); list.ok()) {
    // The events view into the list's own buffer, which a move must keep alive.
    audit::EventList moved = std::move(*list);
    for (const audit::AuditEvent& event : moved) fuzz::Exercise(event);
  }
  if (auto one = audit::ParseEvent(body); one.ok()) {
    FUZZ_CHECK(one->size() == 1);
    for (const audit::AuditEvent& event : *one) fuzz::Exercise(event);
  }
  return 0;
}
