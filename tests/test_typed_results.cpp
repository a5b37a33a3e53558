// Typed results between modules (docs/ARCHITECTURE.md): each struct that crosses a module boundary
// has one to_json/from_json pair, and a value survives the round trip unchanged.
#include <catch2/catch.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/model/hf_export.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/train/evaluation.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("typed results: MemoryReport survives its JSON round trip", "[typed]") {
  MemoryReport r;
  for (int c = 0; c < kNumMemoryCategories; ++c) r.peak[std::size_t(c)] = 1000.0 * (c + 1) + 0.5;
  r.model_state = 6000.5;
  r.total = 21003;
  r.formula_model_state = 5999.25;
  r.zero_stage = 2;
  const nlohmann::json j = r.to_json();
  CHECK(j["gathered"] == 4000.5);  // the names are memory_category_name's
  CHECK(j["zero_stage"] == 2);
  const MemoryReport back = test::read_back<MemoryReport>(j);
  CHECK(back.peak == r.peak);
  CHECK(back.model_state == r.model_state);
  CHECK(back.total == r.total);
  CHECK(back.formula_model_state == r.formula_model_state);
  CHECK(back.zero_stage == r.zero_stage);
  // DDP (stage 0) writes no formula fields, and reads back as stage 0.
  r.zero_stage = 0;
  CHECK_FALSE(r.to_json().contains("formula_model_state"));
  CHECK(test::read_back<MemoryReport>(r.to_json()).zero_stage == 0);
}

TEST_CASE("typed results: HoldoutLoss survives its JSON round trip", "[typed]") {
  HoldoutLoss h;
  h.loss = 2.6133918762207031;
  h.tokens = 8192;
  h.loss_by_owner = {{"alice", 2.5}, {"bob", 2.7267837524414062}};
  const nlohmann::json j = json_fields::write(h);
  CHECK(j["holdout_loss"] == h.loss);  // the summary's field names (docs/FORMATS.md "eval")
  const HoldoutLoss back = test::read_back<HoldoutLoss>(j);
  CHECK(back.loss == h.loss);
  CHECK(back.tokens == h.tokens);
  CHECK(back.loss_by_owner == h.loss_by_owner);
}

TEST_CASE("typed results: the manifest's tokenizer entry survives its round trip, a bad one is named", "[typed]") {
  const HfTokenizerInfo t{"bytes+sep", 257, 256};
  const nlohmann::json j = t.to_json();
  CHECK(j["separator"] == 256);  // the keys ckpt-reshard --export hf reads from a manifest's extra
  CHECK(HfTokenizerInfo::from_json(j, "m") == t);
  nlohmann::json broken = j;
  broken.erase("vocab");
  CHECK_THROWS_WITH(HfTokenizerInfo::from_json(broken, "step_4"), Catch::Contains("step_4: tokenizer has no field /vocab"));
  broken = j;
  broken["name"] = 7;
  CHECK_THROWS_AS(HfTokenizerInfo::from_json(broken, "step_4"), UsageError);
}
