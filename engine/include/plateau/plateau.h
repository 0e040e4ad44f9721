/* plateau.h — the core of libplateau's public API in one include: statuses,
 * files, logging, timers, the device and its tracked memory, tensors, the
 * shared kernels and the communicator.  The bf16 helpers
 * (plateau/host_device.h), the operator types (plateau/optypes.h) and the
 * operators, the model, the training step and the planner (<plateau/ops/...>,
 * model/, train/, plan/) are included by name. */
#ifndef PLATEAU_H
#define PLATEAU_H

#define PLATEAU_VERSION "0.1.0"

#include "plateau/comm.h"
#include "plateau/dev.h"
#include "plateau/file.h"
#include "plateau/kernels.h"
#include "plateau/log.h"
#include "plateau/status.h"
#include "plateau/tensor.h"
#include "plateau/timer.h"

#endif
