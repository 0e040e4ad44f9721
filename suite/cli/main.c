/* main.c — the `plateau` program: dispatches to its commands.
 *
 *   plateau --help | plateau <cmd> --help
 *   plateau info                  what this build and machine have
 *   plateau bench <name> [opts]   one benchmark (bench.c harness)
 *   plateau report RUN_DIR        tables and charts from result files
 *   plateau compare NEW REF       a run against a reference (regressions)
 *   plateau tokens IN OUT         a byte-level token shard of a file
 *   plateau schema                the result columns: name, unit, meaning
 *
 * Usage errors (unknown command or option) print a message and exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../baselines/fsdp2/fsdp2.h"
#include "compare_cmd.h"
#include "harness/bench.h"
#include "harness/trial.h"
#include "plan_cmd.h"
#include "plateau/plateau.h"
#include "report/report.h"
#include "results/schema.h"
#include "tokens.h"

#include "plateau_git.h" /* generated: build/gen (jobs/provenance header) */

/* "sha", "sha-dirty" or "none" (built without git), then the tree hash */
#define PL_SOURCES PL_GIT_SHA, PL_GIT_DIRTY == 1 ? "-dirty" : "", PL_TREE_HASH

static void usage(FILE *f) {
  fprintf(
      f,
      "plateau %s (%s%s, tree %s) — bounded-memory long-context MoE training: "
      "engine benchmarks\n\n"
      "usage: plateau <command> [options]\n\n"
      "commands:\n"
      "  info                  backends built, devices, driver/CUDA/NCCL/MPI "
      "versions\n"
      "  bench <name> [opts]   run one benchmark; results go to a new file "
      "under -o DIR\n"
      "  report RUN_DIR        Markdown tables and charts from the result "
      "files in RUN_DIR\n"
      "  compare NEW REF       NEW's rows against REF's, metric by metric "
      "(regressions)\n"
      "  tokens IN OUT         a token shard of IN's bytes (byte-level, "
      "V 256)\n"
      "  schema                the columns of result files (name, unit, "
      "meaning)\n"
      "  plan [opts]           per-rank memory budget, feasibility and "
      "throughput before launch\n\n",
      PLATEAU_VERSION, PL_SOURCES);
  fprintf(f, "benches:\n");
  for (int i = 0; i < pl_bench_count(); i++)
    fprintf(f, "  %-10s %s\n", pl_bench_at(i)->name, pl_bench_at(i)->summary);
  fprintf(f, "\n'plateau <command> --help' and 'plateau bench <name> --help' "
             "describe each.\n"
             "exit codes: 0 ok, 1 a check failed, 2 usage, 3 runtime error\n");
}

static int is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

static void print_dev(const char *label, const pl_dev_info *in) {
  printf("%s: %s\n", label, in->name);
  printf("  memory: %.2f GiB, %s: %d, blas: %s\n",
         (double)in->total_bytes / (1024.0 * 1024.0 * 1024.0),
         in->backend == PL_BACKEND_CUDA ? "SMs" : "cores", in->sm_count,
         in->blas);
  if (in->backend == PL_BACKEND_CUDA)
    printf("  driver: %s, CUDA runtime: %s\n", in->driver, in->runtime);
}

static int cmd_info(int argc, char **argv) {
  if (argc > 1) {
    if (is_help(argv[1])) {
      printf("usage: plateau info\n  Print the version, the backends built "
             "into this binary, the CUDA devices\n  visible, the MPI, NCCL "
             "and cuDNN versions, this launch's ranks, then the CPU device\n  "
             "(name, "
             "memory, cores, BLAS) and each GPU (name, memory, SMs, BLAS, "
             "driver and\n  CUDA runtime).\n");
      return 0;
    }
    fprintf(stderr, "plateau info: unknown argument '%s' (it takes none)\n",
            argv[1]);
    return 2;
  }
  int code = 0;
  pl_status st = pl_init(&argc, &argv);
  if (st != PL_OK)
    fprintf(stderr, "plateau info: warning: MPI init: %s\n", pl_last_error());
  printf("plateau %s, git %s%s, tree %s\n", PLATEAU_VERSION, PL_SOURCES);
  printf("backends built: cpu%s\n",
         pl_backend_available(PL_BACKEND_CUDA) ? " cuda" : "");
  int ncuda = pl_cuda_device_count();
  printf("CUDA devices visible: %d\n", ncuda);
  printf("MPI: %s\n", pl_mpi_version());
  printf("NCCL: %s\n", pl_nccl_version());
  printf("cuDNN: %s\n", pl_cudnn_version());
  if (st == PL_OK)
    printf("MPI ranks in this launch: %d\n", pl_world_size());
  printf("local rank: %d\n", pl_local_rank());

  pl_dev *dev = NULL;
  pl_dev_info in;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) == PL_OK &&
      pl_dev_info_get(dev, &in) == PL_OK) {
    print_dev("cpu device", &in);
  } else {
    fprintf(stderr, "plateau info: cpu device: %s\n", pl_last_error());
    code = 3;
  }
  if (dev)
    pl_dev_destroy(dev);
  for (int i = 0; i < ncuda; i++) {
    dev = NULL;
    char label[32];
    snprintf(label, sizeof label, "cuda device %d", i);
    if (pl_dev_create(PL_BACKEND_CUDA, i, &dev) == PL_OK &&
        pl_dev_info_get(dev, &in) == PL_OK) {
      print_dev(label, &in);
    } else {
      fprintf(stderr, "plateau info: %s: %s\n", label, pl_last_error());
      code = 3;
    }
    if (dev)
      pl_dev_destroy(dev);
  }
  if (st == PL_OK)
    pl_finalize();
  return code;
}

static int cmd_schema(int argc, char **argv) {
  if (argc > 1 && is_help(argv[1])) {
    printf("usage: plateau schema\n  Print the columns a result file may "
           "have, as a Markdown table\n  (column | unit | meaning): one name "
           "per quantity in every bench.\n");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "plateau schema: unknown argument '%s' (it takes none)\n",
            argv[1]);
    return 2;
  }
  printf("Result files: `# plateau-results: %d`.\n\n", PL_RESULTS_SCHEMA);
  pl_schema_markdown(stdout);
  return 0;
}

int main(int argc, char **argv) {
  /* maxbatch's trial guard (trial.c): no MPI, nothing else */
  if (argc > 1 && strcmp(argv[1], "__trial-guard") == 0)
    return pl_trial_guard_main(argc, argv);
  /* the planner measures the FSDP2 baseline through this (plan.h) */
  pl_fsdp2_register_dry();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (is_help(cmd) || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("plateau %s (%s%s, tree %s)\n", PLATEAU_VERSION, PL_SOURCES);
    return 0;
  }
  if (strcmp(cmd, "info") == 0)
    return cmd_info(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0)
    return pl_bench_main(argc, argv);
  if (strcmp(cmd, "report") == 0)
    return pl_report_main(argc - 1, argv + 1);
  if (strcmp(cmd, "compare") == 0)
    return pl_compare_main(argc - 1, argv + 1);
  if (strcmp(cmd, "tokens") == 0)
    return pl_tokens_main(argc - 1, argv + 1);
  if (strcmp(cmd, "schema") == 0)
    return cmd_schema(argc - 1, argv + 1);
  if (strcmp(cmd, "plan") == 0)
    return pl_plan_main(argc - 1, argv + 1);
  if (cmd[0] == '-')
    fprintf(stderr, "plateau: unknown option '%s'\n", cmd);
  else
    fprintf(stderr, "plateau: unknown command '%s'\n", cmd);
  fprintf(stderr, "run 'plateau --help' for the commands\n");
  return 2;
}
