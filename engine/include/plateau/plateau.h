/* plateau.h — the whole public API of libplateau. */
#ifndef PLATEAU_H
#define PLATEAU_H

#define PLATEAU_VERSION "0.1.0"

#include "plateau/status.h"
#include "plateau/file.h"
#include "plateau/log.h"
#include "plateau/timer.h"
#include "plateau/dev.h"
#include "plateau/tensor.h"
#include "plateau/kernels.h"
#include "plateau/comm.h"

#endif
