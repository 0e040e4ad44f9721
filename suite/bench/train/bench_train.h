/* bench_train.h — what `plateau bench train` (bench_train.c) offers the
 * other benches: `plateau bench maxbatch --bench train` runs its trials as
 * bench train and builds its option table from bench train's: the entries
 * of train_options.def (the choice lists they name come with
 * train_system.h and baselines/train_baselines.h), the presets and which system
 * owns a knob (train_args.h), the systems by name (train_system.h).  The
 * bench's own files include the header of each unit they call instead. Internal
 * to suite/. */
#ifndef PLATEAU_SUITE_BENCH_TRAIN_H
#define PLATEAU_SUITE_BENCH_TRAIN_H

#include "../baselines/train_baselines.h"
#include "train_args.h"
#include "train_system.h"

#endif
