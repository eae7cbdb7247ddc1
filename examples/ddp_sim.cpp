// ddp_sim: trains a model the way PyTorch DDP does (FSDP with --fsdp), on the
// CPU under MPI, annotated with NVTX ranges named like torch.profiler's. It is
// the demo rankscope profiles and the ground truth that the straggler, overlap
// and bucket analyses are checked against, so everything it does follows from
// its flags; docs/examples.md describes it.
#include <mpi.h>
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <variant>
#include <thread>
#include <vector>

#include "ddp_buckets.h"
#include "nvtx_annotations.h"

namespace {

using Clock = std::chrono::steady_clock;
using Microseconds = std::chrono::duration<double, std::micro>;
using Milliseconds = std::chrono::duration<double, std::milli>;
using ddp_sim::nvtx::ScopedRange;

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
// Bounds that keep every duration and byte count far from overflowing.
constexpr int kMaxSteps = 1'000'000;
constexpr double kMaxMicroseconds = 3.6e9;  // an hour
constexpr double kMaxFactor = 1000;         // --slowdown, 1 + --jitter
constexpr double kMaxCapBytes = 0x1p60;     // a bucket cap above every model is as good as any other

struct Options {
  int layers = 24;
  double layer_mb = 4;
  double forward_us = 300;
  double optimizer_us = 1000;
  int steps = 20;
  int warmup_steps = 2;
  int slow_rank = -1;  // -1: no rank is slowed
  double slowdown = 1;
  double jitter = 0;
  std::uint64_t seed = 0;
  double first_bucket_mb = 1;
  double bucket_mb = 25;
  bool fsdp = false;
  int unit_layers = 4;
  bool prefetch = true;
  std::string truth_path;
  std::string compute = "auto";  // spin, sleep, or auto: sleep where the node has fewer cores than ranks
  bool sleep_compute = false;    // what auto came to
  double progress_us = 100;      // how often compute lets outstanding collectives progress; 0: between layers only
  double data_loading_us = 0;    // each step first waits this long for its batch, in a "data loading" range

  std::size_t layer_floats() const {
    return static_cast<std::size_t>(std::llround(layer_mb * kBytesPerMiB / sizeof(float)));
  }
  std::size_t first_bucket_cap_bytes() const { return cap_bytes(first_bucket_mb); }
  std::size_t bucket_cap_bytes() const { return cap_bytes(bucket_mb); }

 private:
  // Truncated like PyTorch's int(bucket_cap_mb * 1024 * 1024).
  static std::size_t cap_bytes(double mb) {
    return static_cast<std::size_t>(std::min(mb * kBytesPerMiB, kMaxCapBytes));
  }
};

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", value);
  return text;
}

// Checks a number against bounds with a message a user can act on ("must be
// at least 1, got 0"); what is not a number is left for the option to reject.
CLI::Validator bounds(double lowest, double highest = HUGE_VAL, bool lowest_allowed = true) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return {};
        char message[128];
        if (!std::isfinite(value)) {
          std::snprintf(message, sizeof message, "must be a finite number, got %s", text.c_str());
        } else if ((lowest_allowed ? value >= lowest : value > lowest) && value <= highest) {
          return {};
        } else {
          const std::string upper = highest == HUGE_VAL ? "" : " and at most " + format_number(highest);
          std::snprintf(message, sizeof message, "must be %s %s%s, got %s",
                        lowest_allowed ? "at least" : "greater than", format_number(lowest).c_str(), upper.c_str(),
                        text.c_str());
        }
        return message;
      },
      "");
}
const CLI::Validator kPositive = bounds(0, HUGE_VAL, false);

// Reads the flags. Returns the options, or the exit status when the run ends
// here: 0 after --help, 2 after a bad flag. Only rank 0 prints, so that a job
// of many ranks prints one message.
std::variant<Options, int> parse_options(int argc, char** argv, int rank, int world_size) {
  Options options;
  bool no_prefetch = false;
  CLI::App app{
      "ddp_sim: an MPI program that trains like PyTorch DDP (or FSDP) on the CPU, with NVTX ranges, "
      "for profiling. Run it under mpiexec."};
  app.option_defaults()->always_capture_default();
  app.add_option("--layers", options.layers, "Layers in the model")->check(bounds(1));
  app.add_option("--layer-mb", options.layer_mb, "MiB of float32 parameters per layer")->check(kPositive);
  app.add_option("--forward-us", options.forward_us,
                 "Forward compute per layer in microseconds; backward takes twice as long")
      ->check(bounds(0, kMaxMicroseconds));
  app.add_option("--optimizer-us", options.optimizer_us, "Optimizer compute per step in microseconds")
      ->check(bounds(0, kMaxMicroseconds));
  app.add_option("--steps", options.steps, "Steps counted in the summary")->check(bounds(1, kMaxSteps));
  app.add_option("--warmup-steps", options.warmup_steps, "Steps run first and not counted")
      ->check(bounds(0, kMaxSteps));
  app.add_option("--data-loading-us", options.data_loading_us,
                 "Each step first waits this long for its batch (a slow data loader), in a \"data loading\" range")
      ->check(CLI::Range(0.0, kMaxMicroseconds));
  CLI::Option* slow_rank = app.add_option("--slow-rank", options.slow_rank, "The rank whose compute is slowed")
                               ->check(bounds(0))
                               ->default_str("none");
  app.add_option("--slowdown", options.slowdown, "Factor applied to the slow rank's compute durations")
      ->check(bounds(0, kMaxFactor, false))
      ->needs(slow_rank);
  app.add_option("--jitter", options.jitter, "Each compute duration is multiplied by 1 + U[0, jitter]")
      ->check(bounds(0, kMaxFactor - 1));
  app.add_option("--seed", options.seed, "Seed of the jitter (each rank's generator also takes its rank)");
  CLI::Option* fsdp = app.add_flag("--fsdp", options.fsdp, "Train like FSDP (full sharding) instead of DDP");
  app.add_option("--first-bucket-mb", options.first_bucket_mb, "DDP: cap of the first gradient bucket, MiB")
      ->check(kPositive)
      ->excludes(fsdp);
  app.add_option("--bucket-mb", options.bucket_mb, "DDP: cap of the other gradient buckets, MiB")
      ->check(kPositive)
      ->excludes(fsdp);
  app.add_option("--unit-layers", options.unit_layers, "FSDP: layers per unit")->check(bounds(1))->needs(fsdp);
  app.add_flag("--no-prefetch", no_prefetch, "FSDP: gather each unit's parameters only when it needs them")
      ->needs(fsdp);
  app.add_option("--truth", options.truth_path, "Write the run's ground truth to this JSON file (rank 0)");
  app.add_option("--progress-us", options.progress_us,
                 "How often compute lets outstanding collectives progress, in microseconds, as a communication "
                 "engine running beside compute would (NCCL on its own stream); 0: only between layers")
      ->check(CLI::Range(0.0, kMaxMicroseconds))
      ->capture_default_str();
  app.add_option("--compute", options.compute,
                 "How compute is emulated: spin (real work on a core), sleep (no core used, as if each rank had its "
                 "own device), or auto (sleep where this node has fewer cores than ranks)")
      ->check(CLI::IsMember({"spin", "sleep", "auto"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
    options.prefetch = !no_prefetch;
    // MPI counts elements in int; an FSDP unit is padded by up to one element per rank.
    const double model_floats = options.layer_mb * kBytesPerMiB / sizeof(float) * options.layers;
    if (model_floats + world_size > INT_MAX) {
      throw CLI::ValidationError("--layer-mb",
                                 "the model (--layers times --layer-mb) must stay below 8 GiB, "
                                 "the most MPI can reduce in one call");
    }
    if (options.layer_floats() == 0)
      throw CLI::ValidationError("--layer-mb", "a layer needs at least one float (4 bytes)");
    if (options.slow_rank >= world_size) {
      throw CLI::ValidationError("--slow-rank", std::to_string(options.slow_rank) + " is not a rank of this " +
                                                    std::to_string(world_size) + "-rank job");
    }
  } catch (const CLI::ParseError& error) {
    const bool help = error.get_exit_code() == 0;
    if (rank == 0) {
      if (help) {
        app.exit(error);
      } else {
        std::fprintf(stderr, "ddp_sim: %s\nRun with --help for the flags.\n", error.what());
      }
    }
    return help ? 0 : 2;
  }
  return options;
}

// Every rank computes the same starting parameters, as DDP's broadcast from
// rank 0 would leave them; model_index counts floats from layer 0 on.
float initial_parameter(std::size_t model_index) { return 1.0f + static_cast<float>(model_index % 1024) / 8192.0f; }

// When this rank's emulated kernels end: nominal × slowdown (on the slow rank)
// × (1 + noise), the noise uniform in [0, jitter], drawn per kernel from a
// generator seeded by --seed and the rank so that a run can be repeated.
class ComputeTiming {
 public:
  ComputeTiming(const Options& options, int rank)
      : slowdown_(rank == options.slow_rank ? options.slowdown : 1.0),
        jitter_(options.jitter),
        noise_(seeded_generator(options.seed, rank)) {}

  Clock::time_point deadline(Microseconds nominal) {
    const double noise = jitter_ > 0 ? std::uniform_real_distribution<double>(0.0, jitter_)(noise_) : 0.0;
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(nominal * (slowdown_ * (1.0 + noise)));
  }

 private:
  static std::mt19937_64 seeded_generator(std::uint64_t seed, int rank) {
    std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                           static_cast<std::uint32_t>(rank)};
    return std::mt19937_64(sequence);
  }

  double slowdown_;
  double jitter_;
  std::mt19937_64 noise_;
};

// The emulated kernel: real floating-point work sweeping real memory, so that
// it loads the core and its caches as compute would, until a deadline on the
// monotonic clock rather than for a number of operations, so that a rank
// sharing its core with others still takes the configured time. Yielding
// between chunks lets ranks that share a core take turns every few
// microseconds, so each is back on a core just after its deadline instead of a
// scheduler time slice later. Blending toward the source keeps every value
// bounded however many sweeps fit.
//
// Sleeping instead models a rank whose compute runs on a device of its own:
// ranks that outnumber the cores then keep their configured times, which
// spinning on shared cores cannot promise.
//
// Every `progress_every` (when positive) it lets outstanding collectives move,
// as a communication engine beside compute would.
template <typename Progress>
void work_until(Clock::time_point deadline, std::span<float> target, std::span<const float> source, bool sleep,
                Clock::duration progress_every, Progress&& progress) {
  constexpr std::size_t kChunk = 4096;  // a few microseconds of work
  auto next_progress = Clock::now() + progress_every;
  const auto make_progress = [&] {
    if (progress_every.count() <= 0 || Clock::now() < next_progress) return;
    progress();
    next_progress = Clock::now() + progress_every;
  };
  if (sleep) {
    while (Clock::now() < deadline) {
      std::this_thread::sleep_until(progress_every.count() > 0 ? std::min(deadline, next_progress) : deadline);
      make_progress();
    }
    return;
  }
  std::size_t begin = 0;
  while (Clock::now() < deadline) {
    make_progress();
    const std::size_t end = std::min(begin + kChunk, target.size());
    for (std::size_t i = begin; i < end; ++i) target[i] = 0.75f * target[i] + 0.25f * source[i];
    begin = end == target.size() ? 0 : end;
    sched_yield();
  }
}

// "1 bucket", "5 buckets"
std::string count_of(std::size_t count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

// "a, b, c MiB"
std::string mib_list(const std::vector<std::size_t>& byte_counts) {
  std::string text;
  for (std::size_t bytes : byte_counts) {
    char number[32];
    std::snprintf(number, sizeof number, "%s%.4g", text.empty() ? "" : ", ", static_cast<double>(bytes) / kBytesPerMiB);
    text += number;
  }
  return text + " MiB";
}

void write_json_ints(std::FILE* out, const std::vector<int>& values) {
  std::fputc('[', out);
  for (std::size_t i = 0; i < values.size(); ++i) std::fprintf(out, "%s%d", i ? ", " : "", values[i]);
  std::fputc(']', out);
}

void write_json_milliseconds(std::FILE* out, std::span<const double> values) {
  std::fputc('[', out);
  for (std::size_t i = 0; i < values.size(); ++i) std::fprintf(out, "%s%.3f", i ? ", " : "", values[i]);
  std::fputc(']', out);
}

// One training step of either kind, and what is shared: the model's shape, this
// rank's compute timing, the per-layer kernels and their NVTX names.
class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual void step() = 0;
  // The communication layout for the summary, e.g. "5 buckets (4, 28, 28, 28, 8 MiB)".
  virtual std::string layout_summary() const = 0;
  // The truth file's "buckets" and "units" keys.
  virtual void write_layout_json(std::FILE* out) const = 0;
  // Lets the outstanding collectives move (MPI progresses only inside its calls).
  virtual void progress() = 0;

 protected:
  Trainer(const Options& options, int rank, int world_size)
      : layers_(options.layers),
        layer_floats_(options.layer_floats()),
        world_size_(world_size),
        forward_(options.forward_us),
        backward_(2 * options.forward_us),
        optimizer_(options.optimizer_us),
        timing_(options, rank),
        sleep_compute_(options.sleep_compute),
        progress_every_(std::chrono::duration_cast<Clock::duration>(Microseconds(options.progress_us))),
        activations_(layer_floats_) {
    for (int layer = 0; layer < layers_; ++layer) {
      forward_names_.push_back("forward layer " + std::to_string(layer));
      backward_names_.push_back("backward layer " + std::to_string(layer));
    }
  }

  void forward_layer(int layer, std::span<const float> parameters) {
    ScopedRange range(forward_names_[static_cast<std::size_t>(layer)].c_str());
    work_until(timing_.deadline(forward_), activations_, parameters, sleep_compute_, progress_every_, [this] { progress(); });
  }

  void backward_layer(int layer, std::span<float> gradients, std::span<const float> parameters) {
    ScopedRange range(backward_names_[static_cast<std::size_t>(layer)].c_str());
    work_until(timing_.deadline(backward_), gradients, parameters, sleep_compute_, progress_every_, [this] { progress(); });
  }

  // The gradients arrive summed over the ranks. Averaging them is one real
  // pass over all of them, which takes as long as the memory needs rather
  // than a configured time, so it has a range of its own and the optimizer's
  // range keeps its configured length.
  void average_and_update(std::span<float> parameters, std::span<float> gradients) {
    {
      ScopedRange range("average gradients");
      const float inverse_world_size = 1.0f / static_cast<float>(world_size_);
      for (float& gradient : gradients) gradient *= inverse_world_size;
    }
    ScopedRange range("optimizer");
    work_until(timing_.deadline(optimizer_), parameters, gradients, sleep_compute_, progress_every_, [this] { progress(); });
  }

  const int layers_;
  const std::size_t layer_floats_;
  const int world_size_;

 private:
  const Microseconds forward_, backward_, optimizer_;
  ComputeTiming timing_;
  bool sleep_compute_;
  Clock::duration progress_every_;
  std::vector<float> activations_;
  std::vector<std::string> forward_names_, backward_names_;
};

// DDP: every rank holds the whole model. As soon as backward has finished every
// layer of a bucket, the bucket's gradients are summed over the ranks by a
// non-blocking allreduce, which runs while backward goes on with the layers
// left; the step then waits for all buckets before the optimizer.
class DdpTrainer final : public Trainer {
 public:
  DdpTrainer(const Options& options, int rank, int world_size)
      : Trainer(options, rank, world_size),
        buckets_(ddp_sim::assign_ddp_buckets(
            std::vector<std::size_t>(static_cast<std::size_t>(layers_), layer_floats_ * sizeof(float)),
            options.first_bucket_cap_bytes(), options.bucket_cap_bytes())),
        parameters_(static_cast<std::size_t>(layers_) * layer_floats_),
        gradients_(parameters_.size()),
        bucket_of_layer_(static_cast<std::size_t>(layers_)),
        requests_(buckets_.size(), MPI_REQUEST_NULL) {
    for (int layer = 0; layer < layers_; ++layer) {
      std::span<float> values = layer_slice(parameters_, layer);
      for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = initial_parameter(static_cast<std::size_t>(layer) * layer_floats_ + i);
      }
    }
    for (const ddp_sim::Bucket& bucket : buckets_) {
      ready_names_.push_back("bucket " + std::to_string(bucket.index) + " ready");
      for (int layer : bucket.layers) bucket_of_layer_[static_cast<std::size_t>(layer)] = bucket.index;
    }
  }

  void step() override {
    {
      ScopedRange range("forward");
      for (int layer = 0; layer < layers_; ++layer) forward_layer(layer, layer_slice(parameters_, layer));
    }
    {
      ScopedRange range("backward");
      for (int layer = layers_ - 1; layer >= 0; --layer) {
        backward_layer(layer, layer_slice(gradients_, layer), layer_slice(parameters_, layer));
        const ddp_sim::Bucket& bucket =
            buckets_[static_cast<std::size_t>(bucket_of_layer_[static_cast<std::size_t>(layer)])];
        if (layer == bucket.layers.back()) start_allreduce(bucket);
        progress();
      }
      ScopedRange wait("allreduce wait");
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    }
    average_and_update(parameters_, gradients_);
  }

  void progress() override {
    int all_done = 0;
    MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &all_done, MPI_STATUSES_IGNORE);
  }

  std::string layout_summary() const override {
    std::vector<std::size_t> sizes;
    for (const ddp_sim::Bucket& bucket : buckets_) sizes.push_back(bucket.bytes);
    return count_of(buckets_.size(), "bucket") + " (" + mib_list(sizes) + ")";
  }

  void write_layout_json(std::FILE* out) const override {
    std::fprintf(out, "  \"buckets\": [");
    for (const ddp_sim::Bucket& bucket : buckets_) {
      std::fprintf(out, "%s\n    {\"index\": %d, \"layers\": ", bucket.index ? "," : "", bucket.index);
      write_json_ints(out, bucket.layers);
      std::fprintf(out, ", \"bytes\": %zu}", bucket.bytes);
    }
    std::fprintf(out, "\n  ],\n  \"units\": [],\n");
  }

 private:
  // Layers are stored last first, the order backward produces them.
  std::span<float> layer_slice(std::vector<float>& values, int layer) const {
    return std::span<float>(values).subspan(static_cast<std::size_t>(layers_ - 1 - layer) * layer_floats_,
                                            layer_floats_);
  }

  // A bucket's layers are consecutive from the back, so its gradients are contiguous.
  std::span<float> bucket_gradients(const ddp_sim::Bucket& bucket) {
    return std::span<float>(gradients_)
        .subspan(static_cast<std::size_t>(layers_ - 1 - bucket.layers.front()) * layer_floats_,
                 bucket.layers.size() * layer_floats_);
  }

  void start_allreduce(const ddp_sim::Bucket& bucket) {
    ddp_sim::nvtx::mark(ready_names_[static_cast<std::size_t>(bucket.index)].c_str());
    const std::span<float> gradients = bucket_gradients(bucket);
    MPI_Iallreduce(MPI_IN_PLACE, gradients.data(), static_cast<int>(gradients.size()), MPI_FLOAT, MPI_SUM,
                   MPI_COMM_WORLD, &requests_[static_cast<std::size_t>(bucket.index)]);
  }

  const std::vector<ddp_sim::Bucket> buckets_;
  std::vector<float> parameters_, gradients_;
  std::vector<int> bucket_of_layer_;
  std::vector<MPI_Request> requests_;  // one per bucket
  std::vector<std::string> ready_names_;
};

// FSDP with full sharding: each rank keeps 1/world of every unit's parameters
// (the unit padded to a multiple of the world size). A unit's parameters are
// all-gathered before its forward and again before its backward, and its
// gradients reduce-scattered after its backward, which leaves each rank the
// summed gradients of its own shard for the optimizer.
class FsdpTrainer final : public Trainer {
 public:
  FsdpTrainer(const Options& options, int rank, int world_size)
      : Trainer(options, rank, world_size), prefetch_(options.prefetch) {
    std::size_t shard_offset = 0, largest_unit = 0;
    for (int first = 0; first < layers_; first += options.unit_layers) {
      Unit unit;
      unit.index = static_cast<int>(units_.size());
      unit.first_layer = first;
      unit.layer_count = std::min(options.unit_layers, layers_ - first);
      const std::size_t unit_floats = static_cast<std::size_t>(unit.layer_count) * layer_floats_;
      unit.shard_floats =
          (unit_floats + static_cast<std::size_t>(world_size) - 1) / static_cast<std::size_t>(world_size);
      unit.shard_offset = shard_offset;
      shard_offset += unit.shard_floats;
      largest_unit = std::max(largest_unit, unit.shard_floats * static_cast<std::size_t>(world_size));
      units_.push_back(unit);
    }
    parameter_shards_.resize(shard_offset);
    gradient_shards_.resize(shard_offset);
    for (const Unit& unit : units_) {
      const std::size_t unit_floats = static_cast<std::size_t>(unit.layer_count) * layer_floats_;
      for (std::size_t i = 0; i < unit.shard_floats; ++i) {
        const std::size_t unit_index = static_cast<std::size_t>(rank) * unit.shard_floats + i;
        parameter_shards_[unit.shard_offset + i] =
            unit_index < unit_floats
                ? initial_parameter(static_cast<std::size_t>(unit.first_layer) * layer_floats_ + unit_index)
                : 0.0f;
      }
      allgather_wait_names_.push_back("unit " + std::to_string(unit.index) + " allgather wait");
    }
    for (std::vector<float>& buffer : gathered_) buffer.resize(largest_unit);
    for (std::vector<float>& buffer : unit_gradients_) buffer.resize(largest_unit);
    requests_.fill(MPI_REQUEST_NULL);
  }

  void step() override {
    forward();
    backward();
    average_and_update(parameter_shards_, gradient_shards_);
  }

  std::string layout_summary() const override {
    std::vector<std::size_t> sizes;
    for (const Unit& unit : units_)
      sizes.push_back(static_cast<std::size_t>(unit.layer_count) * layer_floats_ * sizeof(float));
    return count_of(units_.size(), "unit") + " (" + mib_list(sizes) + "), sharded over " +
           count_of(static_cast<std::size_t>(world_size_), "rank") + ", prefetch " + (prefetch_ ? "on" : "off");
  }

  void write_layout_json(std::FILE* out) const override {
    std::fprintf(out, "  \"buckets\": [],\n  \"units\": [");
    for (const Unit& unit : units_) {
      std::vector<int> layers(static_cast<std::size_t>(unit.layer_count));
      std::iota(layers.begin(), layers.end(), unit.first_layer);
      std::fprintf(out, "%s\n    {\"index\": %d, \"layers\": ", unit.index ? "," : "", unit.index);
      write_json_ints(out, layers);
      std::fprintf(out, ", \"bytes\": %zu, \"shard_bytes\": %zu}",
                   static_cast<std::size_t>(unit.layer_count) * layer_floats_ * sizeof(float),
                   unit.shard_floats * sizeof(float));
    }
    std::fprintf(out, "\n  ],\n");
  }

 private:
  struct Unit {
    int index = 0;
    int first_layer = 0;
    int layer_count = 0;
    std::size_t shard_offset = 0;  // in parameter_shards_ and gradient_shards_
    std::size_t shard_floats = 0;
  };

  // With prefetch, each unit's all-gather is started one unit ahead, while the
  // unit before it computes; only the first one of each pass cannot overlap.
  void forward() {
    ScopedRange range("forward");
    for (const Unit& unit : units_) {
      if (!prefetch_ || unit.index == 0) start_allgather(unit);
      wait_allgather(unit);
      if (prefetch_ && unit.index + 1 < static_cast<int>(units_.size())) start_allgather(next(unit, +1));
      for (int layer = unit.first_layer; layer < unit.first_layer + unit.layer_count; ++layer) {
        forward_layer(layer, layer_slice(gathered_, unit, layer));
        progress();
      }
    }
  }

  // The next unit's all-gather is started before this unit's reduce-scatter,
  // as FSDP's BACKWARD_PRE prefetch does.
  void backward() {
    ScopedRange range("backward");
    for (auto unit = units_.rbegin(); unit != units_.rend(); ++unit) {
      if (!prefetch_ || unit == units_.rbegin()) start_allgather(*unit);
      wait_allgather(*unit);
      if (prefetch_ && unit->index > 0) start_allgather(next(*unit, -1));
      // Gradient buffers alternate between units: the unit two back must be
      // reduced before its buffer is written again.
      wait_reduce_scatter(buffer_of(*unit));
      for (int layer = unit->first_layer + unit->layer_count - 1; layer >= unit->first_layer; --layer) {
        backward_layer(layer, layer_slice(unit_gradients_, *unit, layer), layer_slice(gathered_, *unit, layer));
        progress();
      }
      start_reduce_scatter(*unit);
    }
    ScopedRange wait("reduce-scatter wait");
    MPI_Waitall(2, &reduce_scatter_request(0), MPI_STATUSES_IGNORE);
  }

  static std::size_t buffer_of(const Unit& unit) { return static_cast<std::size_t>(unit.index) % 2; }
  const Unit& next(const Unit& unit, int direction) const {
    return units_[static_cast<std::size_t>(unit.index + direction)];
  }
  MPI_Request& allgather_request(std::size_t buffer) { return requests_[buffer]; }
  MPI_Request& reduce_scatter_request(std::size_t buffer) { return requests_[2 + buffer]; }

  std::span<float> layer_slice(std::array<std::vector<float>, 2>& buffers, const Unit& unit, int layer) const {
    return std::span<float>(buffers[buffer_of(unit)])
        .subspan(static_cast<std::size_t>(layer - unit.first_layer) * layer_floats_, layer_floats_);
  }

  void start_allgather(const Unit& unit) {
    const int count = static_cast<int>(unit.shard_floats);
    MPI_Iallgather(&parameter_shards_[unit.shard_offset], count, MPI_FLOAT, gathered_[buffer_of(unit)].data(), count,
                   MPI_FLOAT, MPI_COMM_WORLD, &allgather_request(buffer_of(unit)));
  }

  void wait_allgather(const Unit& unit) {
    ScopedRange range(allgather_wait_names_[static_cast<std::size_t>(unit.index)].c_str());
    MPI_Wait(&allgather_request(buffer_of(unit)), MPI_STATUS_IGNORE);
  }

  void start_reduce_scatter(const Unit& unit) {
    MPI_Ireduce_scatter_block(unit_gradients_[buffer_of(unit)].data(), &gradient_shards_[unit.shard_offset],
                              static_cast<int>(unit.shard_floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                              &reduce_scatter_request(buffer_of(unit)));
  }

  void wait_reduce_scatter(std::size_t buffer) {
    if (reduce_scatter_request(buffer) == MPI_REQUEST_NULL) return;
    ScopedRange range("reduce-scatter wait");
    MPI_Wait(&reduce_scatter_request(buffer), MPI_STATUS_IGNORE);
  }

  void progress() override {
    int all_done = 0;
    MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &all_done, MPI_STATUSES_IGNORE);
  }

  const bool prefetch_;
  std::vector<Unit> units_;
  std::vector<float> parameter_shards_, gradient_shards_;
  // Two of each, used by alternate units: one for the unit computing, one for
  // the unit being gathered ahead or reduced behind it.
  std::array<std::vector<float>, 2> gathered_, unit_gradients_;
  std::array<MPI_Request, 4>
      requests_;  // the all-gathers into gathered_, then the reduce-scatters from unit_gradients_
  std::vector<std::string> allgather_wait_names_;
};

struct StepStatistics {
  double mean_ms = 0;
  double median_ms = 0;
};

StepStatistics statistics(std::span<const double> step_ms) {
  std::vector<double> sorted(step_ms.begin(), step_ms.end());
  std::sort(sorted.begin(), sorted.end());
  const std::size_t middle = sorted.size() / 2;
  return {std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size()),
          sorted.size() % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2};
}

std::string slow_rank_summary(const Options& options) {
  if (options.slow_rank < 0) return "no slow rank";
  char text[64];
  std::snprintf(text, sizeof text, "rank %d slowed %gx", options.slow_rank, options.slowdown);
  return text;
}

void print_summary(const Options& options, int world_size, const Trainer& trainer, const StepStatistics& stats) {
  const auto count = [](int number, const char* noun) { return count_of(static_cast<std::size_t>(number), noun); };
  std::printf("ddp_sim: %s, %s, %s of %.4g MiB, %s, %s, jitter %g; %s after %s: mean step %.3f ms, median %.3f ms.\n",
              count(world_size, "rank").c_str(), options.fsdp ? "FSDP" : "DDP", count(options.layers, "layer").c_str(),
              static_cast<double>(options.layer_floats() * sizeof(float)) / kBytesPerMiB,
              trainer.layout_summary().c_str(), slow_rank_summary(options).c_str(), options.jitter,
              count(options.steps, "step").c_str(), count(options.warmup_steps, "warm-up step").c_str(), stats.mean_ms,
              stats.median_ms);
}

void write_truth(std::FILE* out, const Options& options, int world_size, const Trainer& trainer,
                 std::span<const double> warmup_ms, std::span<const double> counted_ms, const StepStatistics& stats) {
  std::fprintf(out, "{\n  \"program\": \"ddp_sim\",\n  \"mode\": \"%s\",\n  \"world_size\": %d,\n",
               options.fsdp ? "fsdp" : "ddp", world_size);
  std::fprintf(out, "  \"layers\": %d,\n  \"layer_bytes\": %zu,\n", options.layers,
               options.layer_floats() * sizeof(float));
  std::fprintf(out, "  \"forward_us\": %.15g,\n  \"backward_us\": %.15g,\n  \"optimizer_us\": %.15g,\n",
               options.forward_us, 2 * options.forward_us, options.optimizer_us);
  if (options.slow_rank < 0) {
    std::fprintf(out, "  \"slow_rank\": null,\n");
  } else {
    std::fprintf(out, "  \"slow_rank\": %d,\n", options.slow_rank);
  }
  std::fprintf(out, "  \"slowdown\": %.15g,\n  \"jitter\": %.15g,\n  \"seed\": %llu,\n", options.slowdown,
               options.jitter, static_cast<unsigned long long>(options.seed));
  std::fprintf(out, "  \"steps\": %d,\n  \"warmup_steps\": %d,\n", options.steps, options.warmup_steps);
  std::fprintf(out, "  \"data_loading_us\": %.15g,\n", options.data_loading_us);
  std::fprintf(out, "  \"compute\": \"%s\",\n", options.sleep_compute ? "sleep" : "spin");
  if (options.fsdp) {
    std::fprintf(out, "  \"unit_layers\": %d,\n  \"prefetch\": %s,\n", options.unit_layers,
                 options.prefetch ? "true" : "false");
  } else {
    std::fprintf(out, "  \"first_bucket_cap_bytes\": %zu,\n  \"bucket_cap_bytes\": %zu,\n",
                 options.first_bucket_cap_bytes(), options.bucket_cap_bytes());
  }
  trainer.write_layout_json(out);
  std::fprintf(out, "  \"warmup_step_times_ms\": ");
  write_json_milliseconds(out, warmup_ms);
  std::fprintf(out, ",\n  \"step_times_ms\": ");
  write_json_milliseconds(out, counted_ms);
  std::fprintf(out, ",\n  \"mean_step_ms\": %.3f,\n  \"median_step_ms\": %.3f\n}\n", stats.mean_ms, stats.median_ms);
}

using File = std::unique_ptr<std::FILE, decltype(&std::fclose)>;

// Whether this node runs more ranks than it has cores.
bool ranks_outnumber_cores() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int ranks_here = 1;
  MPI_Comm_size(node, &ranks_here);
  MPI_Comm_free(&node);
  return static_cast<unsigned>(ranks_here) > std::max(1u, std::thread::hardware_concurrency());
}

int run(int argc, char** argv, int rank, int world_size) {
  std::variant<Options, int> parsed = parse_options(argc, argv, rank, world_size);
  if (const int* exit_status = std::get_if<int>(&parsed)) return *exit_status;
  Options options = std::get<Options>(parsed);
  options.sleep_compute = options.compute == "sleep" || (options.compute == "auto" && ranks_outnumber_cores());

  // The truth file is opened before the run so that an unwritable path is
  // reported at once. Rank 0 tells the others whether to go on, which also
  // starts every rank's first step together.
  File truth(nullptr, &std::fclose);
  int truth_opened = 1;
  if (rank == 0 && !options.truth_path.empty()) {
    truth.reset(std::fopen(options.truth_path.c_str(), "w"));
    if (!truth) {
      std::fprintf(stderr, "ddp_sim: --truth: cannot write %s: %s\n", options.truth_path.c_str(), std::strerror(errno));
      truth_opened = 0;
    }
  }
  MPI_Bcast(&truth_opened, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!truth_opened) return 2;

  std::unique_ptr<Trainer> trainer;
  if (options.fsdp) {
    trainer = std::make_unique<FsdpTrainer>(options, rank, world_size);
  } else {
    trainer = std::make_unique<DdpTrainer>(options, rank, world_size);
  }
  const int total_steps = options.warmup_steps + options.steps;
  ddp_sim::nvtx::StepDomain step_domain(total_steps);
  std::vector<double> step_ms;
  for (int step = 0; step < total_steps; ++step) {
    const Clock::time_point start = Clock::now();
    {
      ddp_sim::nvtx::StepRange range(step_domain, step);
      if (options.data_loading_us > 0) {
        // The batch is not ready: the loader's wait, with no core used.
        ScopedRange loading("data loading");
        std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(options.data_loading_us));
      }
      trainer->step();
    }
    step_ms.push_back(Milliseconds(Clock::now() - start).count());
  }
  if (rank != 0) return 0;

  const std::span<const double> warmup_ms(step_ms.data(), static_cast<std::size_t>(options.warmup_steps));
  const std::span<const double> counted_ms = std::span<const double>(step_ms).subspan(warmup_ms.size());
  const StepStatistics stats = statistics(counted_ms);
  print_summary(options, world_size, *trainer, stats);
  if (truth) {
    write_truth(truth.get(), options, world_size, *trainer, warmup_ms, counted_ms, stats);
    if (std::ferror(truth.get()) || std::fclose(truth.release()) != 0) {
      std::fprintf(stderr, "ddp_sim: --truth: writing %s failed\n", options.truth_path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const int status = run(argc, argv, rank, world_size);
  MPI_Finalize();
  return status;
}
