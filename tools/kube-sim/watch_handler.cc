// WATCH: initial events, WatchList, bookmarks, 410s, streaming.

#include "tools/kube-sim/server_internal.h"

namespace reverser::kubesim {
namespace {

// Gathers watch lines into one HTTP chunk (one send) per batch of events rather than one per
// event; flushes early at kFlushBytes so a long backlog streams in bounded pieces. One writer
// per batch: an idle watch keeps no buffer.
class ChunkWriter {
 public:
  explicit ChunkWriter(httplib::DataSink& sink) : sink_(sink) {}

  bool AddEvent(absl::string_view type, const StoredObject& object) {
    AppendWatchLine(buffer_, type, object.json);
    return buffer_.size() < kFlushBytes || Flush();
  }
  bool AddLine(absl::string_view line) {
    buffer_.append(line.data(), line.size());
    return buffer_.size() < kFlushBytes || Flush();
  }
  // Sends what is gathered; false once the connection is gone.
  bool Flush() {
    if (buffer_.empty()) return true;
    bool ok = sink_.write(buffer_.data(), buffer_.size());
    buffer_.clear();
    return ok;
  }

 private:
  static constexpr size_t kFlushBytes = 256 * 1024;
  httplib::DataSink& sink_;
  std::string buffer_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Watch

void KubeSim::Impl::StartWatch(std::shared_ptr<Ctx> ctx, httplib::Response& res) {
  const ResourceType& type = *ctx->type;
  auto fail = [&](const ApiError& e) { Respond(*ctx, Reply::Err(e), res); };
  if (auto err = ValidateListOptions(*ctx, true)) return fail(*err);
  ApiOr<Selector> labels = Selector::ParseLabels(ctx->Param("labelSelector"));
  if (!labels.ok()) return fail(labels.error());
  ApiOr<Selector> fields = Selector::ParseFields(ctx->Param("fieldSelector"));
  if (!fields.ok()) return fail(fields.error());
  if (!ctx->info.name.empty()) {
    // GET .../{name}?watch=true: a watch on one object.
    fields = Selector::ParseFields("metadata.name=" + ctx->info.name);
  }
  std::string rv = ctx->Param("resourceVersion");
  bool bookmarks = QueryBool(ctx->params(), "allowWatchBookmarks");
  bool send_initial;
  if (ctx->Has("sendInitialEvents")) {
    send_initial = QueryBool(ctx->params(), "sendInitialEvents");
  } else {
    // Unset/"0" RV: initial ADDEDs. Modern servers default this to a WatchList request, so the
    // end bookmark follows when bookmarks were asked for.
    send_initial = rv.empty() || rv == "0";
  }
  bool watch_list = send_initial && options_.profile == Profile::kModern &&
                    (ctx->Has("sendInitialEvents") || rv.empty() || rv == "0");
  int64_t timeout_s = 0;
  absl::Duration timeout = options_.default_watch_timeout;
  if (ctx->Has("timeoutSeconds") && absl::SimpleAtoi(ctx->Param("timeoutSeconds"), &timeout_s) &&
      timeout_s > 0) {
    timeout = absl::Seconds(timeout_s);
  }

  struct WatchState {
    std::vector<std::shared_ptr<const StoredObject>> initial;  // initial ADDED events
    std::string pending;  // lines after the initial events (end bookmark, or a lone ERROR)
    int64_t cursor = 0;
    absl::Time deadline;
    absl::Time next_bookmark;
    uint64_t epoch = 0;
    bool started = false;
    bool finished = false;
    bool cut = false;  // lose the connection once `pending` is written (a cut-watch fault)
  };
  auto state = std::make_shared<WatchState>();
  state->deadline = absl::Now() + timeout;
  state->next_bookmark = absl::Now() + options_.bookmark_interval;
  state->epoch = store_.epoch();
  bool legacy = options_.profile == Profile::kLegacy;
  auto bookmark = [&type, legacy](int64_t at, bool initial_end) {
    Json meta = {{"resourceVersion", std::to_string(at)}};
    if (legacy) meta["creationTimestamp"] = nullptr;
    if (initial_end) meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    return WatchLine("BOOKMARK",
                     {{"kind", type.kind}, {"apiVersion", type.ApiVersion()}, {"metadata", meta}});
  };
  auto error_line = [](const ApiError& e) {
    return absl::StrCat("{\"type\":\"ERROR\",\"object\":", e.StatusBody(), "}\n");
  };

  if (send_initial) {
    ApiOr<Store::StoredSnapshot> snap = store_.ListStored(type.Key(), ctx->info.namespace_);
    if (!snap.ok()) return fail(snap.error());
    int64_t want = rv.empty() || rv == "0" ? 0 : ParseRv(rv);
    if (want > snap->rv) {
      if (!store_.WaitForRv(want, absl::Now() + options_.too_large_rv_wait)) {
        return fail(TooLargeResourceVersion(want, store_.CurrentRv()));
      }
      snap = store_.ListStored(type.Key(), ctx->info.namespace_);
      if (!snap.ok()) return fail(snap.error());
    }
    for (auto& o : snap->items) {
      if (labels->Matches(o->value) && fields->Matches(o->value)) {
        state->initial.push_back(std::move(o));
      }
    }
    state->cursor = snap->rv;
    if (ctx->cut_watch_after >= 0) {
      // A replay cut short: some initial events, never the initial-events-end bookmark.
      if (state->initial.size() > static_cast<size_t>(ctx->cut_watch_after)) {
        state->initial.resize(ctx->cut_watch_after);
      }
      state->cut = true;
    } else if (watch_list && bookmarks) {
      state->pending = bookmark(snap->rv, true);
    }
  } else {
    int64_t n = ParseRv(rv);
    if (n < 0) return fail(BadRequest(absl::StrCat("invalid resource version: ", rv)));
    if (n < store_.CompactedRv()) {
      // Too old: HTTP 200 with a single ERROR event, then the stream ends.
      state->pending = error_line(
          Gone(absl::StrCat("too old resource version: ", n, " (", store_.CompactedRv(), ")")));
      state->finished = true;
    } else if (n > store_.CurrentRv() &&
               !store_.WaitForRv(n, absl::Now() + options_.too_large_rv_wait)) {
      state->pending = error_line(TooLargeResourceVersion(n, store_.CurrentRv()));
      state->finished = true;
    }
    state->cursor = n;
  }

  EmitAudit(*ctx, "ResponseStarted", nullptr);
  res.status = 200;
  // httplib gzips chunked application/json when the client accepts gzip (Go always does), and
  // its compressor holds data back, so events would not reach the client as they happen. Real
  // watches are not compressed: drop the header (the Request is a mutable local inside httplib).
  const_cast<httplib::Request*>(ctx->req)->headers.erase("Accept-Encoding");
  std::string type_key = type.Key();
  std::string ns = ctx->info.namespace_;
  Selector label_sel = *labels, field_sel = *fields;
  auto matches = [label_sel, field_sel, ns](const StoredObject* stored) {
    if (!stored) return false;
    if (!ns.empty() && stored->namespace_ != ns) return false;
    return label_sel.Matches(stored->value) && field_sel.Matches(stored->value);
  };
  absl::Duration bookmark_interval = options_.bookmark_interval;
  // Counts open watch streams; released when httplib drops the provider.
  auto open_watch =
      std::shared_ptr<void>((++active_watches_, nullptr), [this](void*) { --active_watches_; });
  res.set_chunked_content_provider(
      "application/json", [this, ctx, state, type_key, matches, bookmarks, bookmark, error_line,
                           bookmark_interval, open_watch](size_t, httplib::DataSink& sink) {
        ChunkWriter out(sink);
        if (!state->started) {
          state->started = true;
          for (const auto& o : state->initial) {
            if (!out.AddEvent("ADDED", *o)) return false;
          }
          state->initial = {};
          if (!out.AddLine(state->pending) || !out.Flush()) return false;
          state->pending = {};
          if (state->cut) return false;  // the connection drops mid-stream
          if (state->finished) {
            sink.done();
            return true;
          }
        }
        absl::Time now = absl::Now();
        if (now >= state->deadline || store_.shutting_down()) {
          sink.done();  // the stream just ends (terminating chunk), as at timeoutSeconds
          Reply done = Reply::Of(200, nullptr);
          EmitAudit(*ctx, "ResponseComplete", &done);
          return true;
        }
        absl::Time wake =
            std::min(state->deadline, bookmarks ? state->next_bookmark : absl::InfiniteFuture());
        Store::WaitResult w = store_.WaitForEvents(type_key, state->cursor, wake, state->epoch);
        if (w.interrupted) {
          if (store_.shutting_down()) return true;  // next call ends the stream cleanly
          return false;                             // DropWatches(): cut the connection mid-stream
        }
        if (w.expired) {
          out.AddLine(error_line(Gone(absl::StrCat("too old resource version: ", state->cursor,
                                                   " (", store_.CompactedRv(), ")"))));
          out.Flush();
          sink.done();
          return true;
        }
        for (const auto& e : w.events) {
          state->cursor = e.rv;
          bool deleted = e.type == "DELETED";
          bool now_in = !deleted && matches(e.object.get());
          bool was_in = matches(e.prev.get());
          absl::string_view type;
          if (deleted) {
            if (was_in) type = "DELETED";
          } else if (now_in && was_in) {
            type = "MODIFIED";
          } else if (now_in) {
            type = "ADDED";
          } else if (was_in) {
            type = "DELETED";  // no longer matches the selector
          }
          if (type.empty()) continue;
          if (!out.AddEvent(type, *e.object)) return false;
        }
        if (w.events.empty() && w.current_rv > state->cursor) state->cursor = w.current_rv;
        if (bookmarks && absl::Now() >= state->next_bookmark) {
          state->next_bookmark = absl::Now() + bookmark_interval;
          if (!out.AddLine(bookmark(std::max(state->cursor, w.current_rv), false))) return false;
        }
        return out.Flush();
      });
}

}  // namespace reverser::kubesim
