// The identity index and the document editor over in-memory files: bundles, hand-written
// multi-document files, and the sweep of a resync.

#include "services/gitworker/document_editor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/gitworker/target_writer.h"

namespace reverser::gitworker {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

DocumentKey Cm(const std::string& name, const std::string& ns = "default") {
  return {"", "ConfigMap", ns, name};
}

std::string CmYaml(const std::string& name, const std::string& value,
                   const std::string& ns = "default") {
  return absl::StrCat("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ", name,
                      "\n  namespace: ", ns, "\ndata:\n  key: ", value, "\n");
}

// Files "in Git": an index over them and a reader of their blobs.
class Files {
 public:
  explicit Files(std::map<std::string, std::string> files, const std::string& path = "t") {
    git::ChangeSet changes;
    for (auto& [file, text] : files) {
      blobs_[git::BlobIdOf(text)] = text;
      changes[file] = text;
    }
    index_ = IdentityIndex::Empty(path);
    index_.Apply(changes, nullptr);
  }
  const IdentityIndex& index() const { return index_; }
  BlobReader reader() const {
    return [this](const std::string& blob) -> absl::StatusOr<std::string> {
      auto it = blobs_.find(blob);
      if (it == blobs_.end()) return absl::NotFoundError(blob);
      return it->second;
    };
  }
  DocumentEditor Editor(IndexLimits limits = {}) const {
    return DocumentEditor(index_, reader(), limits);
  }

 private:
  std::map<std::string, std::string> blobs_;
  IdentityIndex index_;
};

TEST(IdentityIndexTest, IndexesEveryDocumentOfEveryYamlFile) {
  Files files({
      {"t/bundle.yaml", CmYaml("a", "1") + "---\n" + CmYaml("b", "1") + "---\nplain: yaml\n"},
      {"t/deep/x.yml", CmYaml("c", "1", "other")},
      {"t/broken.yaml", "key: [unclosed\n"},
      {"t/notes.txt", CmYaml("d", "1")},  // not a YAML file name: never read
      {"elsewhere/e.yaml", CmYaml("e", "1")},
  });
  const IdentityIndex& index = files.index();
  EXPECT_EQ(index.Find(Cm("a")), "t/bundle.yaml");
  EXPECT_EQ(index.Find(Cm("b")), "t/bundle.yaml");
  EXPECT_EQ(index.Find(Cm("c", "other")), "t/deep/x.yml");
  EXPECT_FALSE(index.Find(Cm("d")).has_value());
  EXPECT_FALSE(index.Find(Cm("e")).has_value());
  ASSERT_NE(index.FileAt("t/bundle.yaml"), nullptr);
  EXPECT_EQ(index.FileAt("t/bundle.yaml")->documents.size(), 3u);
  EXPECT_EQ(index.FileAt("t/bundle.yaml")->documents[2], nullptr);
  ASSERT_NE(index.FileAt("t/broken.yaml"), nullptr);
  EXPECT_FALSE(index.FileAt("t/broken.yaml")->readable);
  EXPECT_FALSE(index.IsRefused("t/broken.yaml"));
  EXPECT_THAT(index.OfType("", "ConfigMap", "default"),
              ElementsAre(Pair(Cm("a"), "t/bundle.yaml"), Pair(Cm("b"), "t/bundle.yaml")));
  EXPECT_EQ(index.OfType("", "ConfigMap", std::nullopt).size(), 3u);
}

TEST(IdentityIndexTest, DuplicatesAreFoundInTheFirstFileAndSurviveItsRemoval) {
  IdentityIndex index = IdentityIndex::Empty("t");
  index.Apply({{"t/a.yaml", CmYaml("x", "1")}, {"t/b.yaml", CmYaml("x", "2")}}, nullptr);
  EXPECT_EQ(index.Find(Cm("x")), "t/a.yaml");
  EXPECT_EQ(index.OfType("", "ConfigMap", std::nullopt).size(), 2u);
  index.Apply({{"t/a.yaml", std::nullopt}}, nullptr);
  EXPECT_EQ(index.Find(Cm("x")), "t/b.yaml");
}

TEST(IdentityIndexTest, LimitsRefuseTheWholeFileAndTheCutMustAgree) {
  manifest::YamlReadLimits limits;
  limits.max_nodes = 20;
  std::string big;
  for (int i = 0; i < 3; ++i) big += "---\n" + CmYaml(absl::StrCat("n", i), "1");
  auto refused = IdentityIndex::ReadDocuments(big, limits);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  // NUL bytes (binary, UTF-16) and top-level scalars are no documents reverser edits.
  for (const std::string& text :
       {std::string("a: 1\0", 5), std::string("just text\n"), std::string("a: 1\n---\nword\n")}) {
    auto read = IdentityIndex::ReadDocuments(text);
    ASSERT_TRUE(read.ok());
    EXPECT_FALSE(read->has_value()) << text;
  }
  auto empty_ones = IdentityIndex::ReadDocuments("---\n# only a comment\n---\n" + CmYaml("a", "1"));
  ASSERT_TRUE(empty_ones.ok() && empty_ones->has_value());
  EXPECT_THAT(**empty_ones, ElementsAre(std::nullopt, Cm("a")));
}

TEST(DocumentEditorTest, UpdatesOneDocumentOfAHandWrittenBundleByteForByte) {
  const std::string head = "\xEF\xBB\xBF# team bundle\r\n";
  const std::string a =
      "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: a\r\n  namespace: default\r\n"
      "data:\r\n  key: \"1\"\r\n";
  const std::string b_sep = "--- # b follows\r\n# b's note\r\n";
  const std::string b =
      "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: b, namespace: default}\r\n";
  const std::string end = "...\r\n";
  Files files({{"t/hand.yaml", head + a + b_sep + b + end}});
  DocumentEditor editor = files.Editor();
  auto path = editor.Upsert(Cm("b"), "t/default/configmaps/b.yaml", CmYaml("b", "new"));
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, "t/hand.yaml");
  DocumentEditor::Result result = std::move(editor).Finish();
  ASSERT_THAT(result.changes, ::testing::SizeIs(1));
  std::string crlf = CmYaml("b", "new");
  for (size_t at = 0; (at = crlf.find('\n', at)) != std::string::npos; at += 2) {
    crlf.replace(at, 1, "\r\n");
  }
  EXPECT_EQ(result.changes.at("t/hand.yaml"), head + a + b_sep + crlf + end);
  EXPECT_EQ(result.changed_documents, 1);
  EXPECT_THAT(result.documents.at("t/hand.yaml"), ElementsAre(Cm("a"), Cm("b")));

  // The same bytes again change nothing.
  Files after({{"t/hand.yaml", *result.changes.at("t/hand.yaml")}});
  DocumentEditor again = after.Editor();
  ASSERT_TRUE(again.Upsert(Cm("b"), "t/x.yaml", CmYaml("b", "new")).ok());
  EXPECT_TRUE(std::move(again).Finish().changes.empty());
}

TEST(DocumentEditorTest, NewObjectsAreAppendedToTheirPlacementFile) {
  Files files({{"t/default/configmaps.yaml", "# mirrored by reverser\n" + CmYaml("a", "1")}});
  DocumentEditor editor = files.Editor();
  ASSERT_TRUE(editor.Upsert(Cm("b"), "t/default/configmaps.yaml", CmYaml("b", "1")).ok());
  ASSERT_TRUE(editor.Upsert(Cm("c"), "t/default/configmaps.yaml", CmYaml("c", "1")).ok());
  // Written twice in one commit: the second edit finds the first.
  ASSERT_TRUE(editor.Upsert(Cm("b"), "t/default/configmaps.yaml", CmYaml("b", "2")).ok());
  DocumentEditor::Result result = std::move(editor).Finish();
  EXPECT_EQ(result.changes.at("t/default/configmaps.yaml"),
            "# mirrored by reverser\n" + CmYaml("a", "1") + "---\n" + CmYaml("b", "2") + "---\n" +
                CmYaml("c", "1"));
  EXPECT_THAT(result.documents.at("t/default/configmaps.yaml"),
              ElementsAre(Cm("a"), Cm("b"), Cm("c")));
}

TEST(DocumentEditorTest, DeletesSpliceOutOneDocumentAndTheLastOneDeletesTheFile) {
  const std::string text = "# header\n" + CmYaml("a", "1") + "---\n" + CmYaml("b", "1") +
                           "---\nplain: yaml\n---\n" + CmYaml("c", "1");
  Files files({{"t/all.yaml", text}, {"t/solo.yaml", CmYaml("s", "1")}});
  DocumentEditor editor = files.Editor();
  ASSERT_EQ(*editor.Delete(Cm("a")), "t/all.yaml");
  ASSERT_EQ(*editor.Delete(Cm("c")), "t/all.yaml");
  ASSERT_EQ(*editor.Delete(Cm("s")), "t/solo.yaml");
  EXPECT_FALSE(editor.Delete(Cm("missing"))->has_value());
  DocumentEditor::Result result = std::move(editor).Finish();
  EXPECT_EQ(result.changes.at("t/all.yaml"),
            "# header\n---\n" + CmYaml("b", "1") + "---\nplain: yaml\n");
  EXPECT_FALSE(result.changes.at("t/solo.yaml").has_value());
  EXPECT_EQ(result.changed_documents, 3);

  // Only non-object documents are left: they are someone's, the file stays.
  Files rest({{"t/all.yaml", *result.changes.at("t/all.yaml")}});
  DocumentEditor last = rest.Editor();
  ASSERT_TRUE(last.Delete(Cm("b")).ok());
  EXPECT_EQ(std::move(last).Finish().changes.at("t/all.yaml"), "# header\n---\nplain: yaml\n");
  // Nothing but empty documents left: the file goes.
  Files empties({{"t/e.yaml", "---\n" + CmYaml("a", "1") + "---\n"}});
  DocumentEditor gone = empties.Editor();
  ASSERT_TRUE(gone.Delete(Cm("a")).ok());
  EXPECT_FALSE(std::move(gone).Finish().changes.at("t/e.yaml").has_value());
}

TEST(DocumentEditorTest, RefusesWhatWouldDamageOrHideDocuments) {
  Files files({{"t/broken.yaml", "key: [unclosed\n"},
               {"t/bundle.yaml", CmYaml("a", "1") + "---\n" + CmYaml("b", "1")}});
  DocumentEditor editor = files.Editor();
  auto into_broken = editor.Upsert(Cm("x"), "t/broken.yaml", CmYaml("x", "1"));
  EXPECT_EQ(RefusalReasonOf(into_broken.status()), reverser::v1::REFUSAL_REASON_COMMIT_REFUSED);
  // Encrypted documents are never bundled.
  auto secret = editor.Upsert(Cm("a"), "t/a.sops.yaml", CmYaml("a", "2"), /*sensitive=*/true);
  EXPECT_EQ(RefusalReasonOf(secret.status()), reverser::v1::REFUSAL_REASON_COMMIT_REFUSED);
  EXPECT_TRUE(std::move(editor).Finish().changes.empty());

  // A file that would outgrow the read limits is left as it was; its objects are refused.
  IndexLimits small;
  small.max_file_bytes = 200;
  DocumentEditor growing = files.Editor(small);
  ASSERT_TRUE(growing.Upsert(Cm("c"), "t/bundle.yaml", CmYaml("c", "1")).ok());
  DocumentEditor::Result result = std::move(growing).Finish();
  EXPECT_TRUE(result.changes.empty());
  ASSERT_EQ(result.refused.size(), 1u);
  EXPECT_EQ(result.refused[0].path, "t/bundle.yaml");
  EXPECT_THAT(result.refused[0].keys, ElementsAre(Cm("c")));
  EXPECT_EQ(RefusalReasonOf(result.refused[0].status), reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED);
}

TEST(ResyncPlanTest, SweepRemovesUndesiredDocumentsOfItsTypeFromBundles) {
  const std::string deployment =
      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n  namespace: default\n";
  Files files({
      {"t/mixed.yaml", CmYaml("keep", "1") + "---\n" + deployment + "---\n" + CmYaml("gone", "1")},
      {"t/only-gone.yaml", CmYaml("gone2", "1")},
      {"t/kustomization.yaml", CmYaml("allowlisted", "1")},
      {"t/other-ns.yaml", CmYaml("gone3", "1", "other")},
  });
  PreparedResync prepared;
  prepared.gvr = {"", "v1", "configmaps"};
  prepared.kind = "ConfigMap";
  prepared.namespace_ = "default";
  prepared.upserts.push_back({Cm("keep"), "t/default/configmaps/keep.yaml", CmYaml("keep", "1")});
  ResyncChanges changes = PlanResyncChanges(files.index(), prepared, files.reader());
  EXPECT_THAT(changes.swept,
              ElementsAre(Pair(Cm("gone"), "t/mixed.yaml"), Pair(Cm("gone2"), "t/only-gone.yaml")));
  EXPECT_EQ(changes.changes.at("t/mixed.yaml"), CmYaml("keep", "1") + "---\n" + deployment);
  EXPECT_FALSE(changes.changes.at("t/only-gone.yaml").has_value());
  EXPECT_EQ(changes.changes.count("t/kustomization.yaml"), 0u);
  EXPECT_EQ(changes.changes.count("t/other-ns.yaml"), 0u);
  EXPECT_EQ(changes.changes.count("t/default/configmaps/keep.yaml"), 0u) << "edited where it is";
  EXPECT_EQ(changes.changed_documents, 2);
}

}  // namespace
}  // namespace reverser::gitworker
