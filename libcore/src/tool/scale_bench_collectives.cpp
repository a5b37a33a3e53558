// scale-bench collectives: the Communicator's and bare MPI's collectives swept over sizes
// (bench/collective_sweep.hpp). Options + one call; rank 0 prints.
#include <iostream>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/bench/collective_sweep.hpp"
#include "shardtrain/tool/scale_bench.hpp"

namespace shardtrain::scale_bench {

Subcommand add_collectives_command(CLI::App& parent) {
  auto options = std::make_shared<SweepOptions>();
  auto json_path = std::make_shared<std::string>();
  Subcommand c;
  c.needs_mpi = true;
  c.app = parent.add_subcommand(
      "collectives",
      "Under mpirun: all-reduce, reduce-scatter, all-gather and broadcast through the Communicator (fast and\n"
      "deterministic) and bare MPI, over sizes: time, algbw, busbw (nccl-tests definitions) and #wrong");
  c.app->add_option("--min-bytes", options->min_bytes, "Smallest operation size in bytes")->capture_default_str();
  c.app->add_option("--max-bytes", options->max_bytes, "Largest operation size in bytes")->capture_default_str();
  c.app->add_option("--factor", options->factor, "Each size is the previous times this")->capture_default_str();
  c.app->add_option("--ops", options->ops, "Collectives: all_reduce reduce_scatter all_gather broadcast")
      ->capture_default_str();
  c.app->add_option("--iterations", options->iterations, "Timed operations per size (0: as many as fit ~0.2 s, 2..50)")
      ->capture_default_str();
  c.app->add_option("--warmup", options->warmup, "Untimed operations per size first")->capture_default_str();
  c.app->add_option("--hierarchical-chunk", options->hierarchical_chunk_bytes,
                    "Several nodes: also time the hierarchical all-reduce pipelined in chunks of about BYTES\n"
                    "(row hierarchical-pipelined; 0: not)")
      ->capture_default_str();
  c.app->add_option("--json", *json_path, "Also write the rows as JSON to FILE (format shardtrain-collectives)");
  c.run = [options, json_path] {
    const CollectiveSweep sweep = run_collective_sweep(*options);
    if (log_rank() == 0) {
      std::cout << sweep_table(sweep.rows);
      if (!json_path->empty()) write_json_file(*json_path, json_fields::write(sweep));
    }
    for (const auto& r : sweep.rows)
      if (r.wrong > 0) return 1;  // a wrong result is a failure verdict
    return 0;
  };
  return c;
}

}  // namespace shardtrain::scale_bench
