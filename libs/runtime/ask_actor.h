#pragma once

// Asking an actor from a gRPC callback without blocking the callback thread.
//
// A gRPC callback handler must return at once: a thread that waits on an actor (scoped_actor
// + receive) is a thread the server cannot use for other calls, and a slow actor would stall
// the whole surface. AskActor sends the request from a short-lived event-based actor and runs
// `on_reply` (or `on_error`) there when the answer (or the timeout) comes; the handler returns
// its reactor and the reply handler finishes it.
//
//   auto* reactor = context->DefaultReactor();
//   runtime::AskActor(system, supervisor, std::chrono::seconds(5),
//       [reactor, response](const std::string& s) { response->ParseFromString(s);
//                                                   reactor->Finish(grpc::Status::OK); },
//       [reactor](const caf::error& e) { reactor->Finish(Unavailable(e)); },
//       list_atom::value);
//   return reactor;
//
// The handlers run on a CAF worker thread, exactly one of them, exactly once.

#include <chrono>
#include <functional>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "caf/all.hpp"
#include "libs/runtime/caf_thread.h"

namespace reverser::runtime {

template <class OnReply, class OnError, class... Message>
void AskActor(caf::actor_system& system, caf::actor destination, std::chrono::milliseconds timeout,
              OnReply on_reply, OnError on_error, Message... message) {
  // The actor stays alive while its request is pending and ends once a handler ran.
  system.spawn([destination = std::move(destination), timeout, on_reply = std::move(on_reply),
                on_error = std::move(on_error),
                message = std::make_tuple(std::move(message)...)](caf::event_based_actor* self) {
    std::apply(
        [&](const auto&... parts) {
          self->request(destination, timeout, parts...).then(on_reply, [on_error](caf::error& err) {
            on_error(err);
          });
        },
        message);
  });
  ReleaseCafThreadLogger();  // the caller is a gRPC thread (caf_thread.h)
}

// Asks every actor of `destinations` the same question at once and calls `done` once with the
// replies that came (in `destinations` order, an error in place of each that failed or timed
// out). Replies are strings (serialized protos): the shape every admin question has.
struct GatheredReply {
  bool ok = false;
  std::string value;  // the reply when ok
  caf::error error;   // otherwise
};

template <class... Message>
void AskAll(caf::actor_system& system, std::vector<caf::actor> destinations,
            std::chrono::milliseconds timeout, std::function<void(std::vector<GatheredReply>)> done,
            Message... message) {
  if (destinations.empty()) {
    done({});
    return;
  }
  system.spawn([destinations = std::move(destinations), timeout, done = std::move(done),
                message = std::make_tuple(std::move(message)...)](caf::event_based_actor* self) {
    // Handlers of one actor never run concurrently: the shared state needs no lock.
    auto replies = std::make_shared<std::vector<GatheredReply>>(destinations.size());
    auto left = std::make_shared<size_t>(destinations.size());
    for (size_t i = 0; i < destinations.size(); ++i) {
      auto settle = [replies, left, done, i](GatheredReply reply) {
        (*replies)[i] = std::move(reply);
        if (--*left == 0) done(std::move(*replies));
      };
      std::apply(
          [&](const auto&... parts) {
            self->request(destinations[i], timeout, parts...)
                .then(
                    [settle](const std::string& value) {
                      settle({true, value, {}});
                    },
                    [settle](caf::error& err) {
                      settle({false, {}, err});
                    });
          },
          message);
    }
  });
  ReleaseCafThreadLogger();  // the caller is a gRPC thread (caf_thread.h)
}

}  // namespace reverser::runtime
