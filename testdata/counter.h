/*
 * The tally cipherbench's counting test provider (provider/counting.c) and test
 * engine (engine/cbcount.c) keep: if CIPHERBENCH_PROVIDER_COUNTER names a file,
 * every process that loads them maps it shared and adds to four native-endian 64-bit
 * counters (magic, contexts, calls, bytes), so the counts of nginx's workers and of
 * every other child of one variant add up in one place. cipherbench reads it after
 * each layer (crates/cipherbench/src/variant/implementation.rs, parse_counter).
 *
 * Header-only, included by exactly one file of each module.
 */
#ifndef CIPHERBENCH_COUNTER_H
#define CIPHERBENCH_COUNTER_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define COUNTER_ENV "CIPHERBENCH_PROVIDER_COUNTER"
#define COUNTER_MAGIC 0x474e49544e554f43ULL /* "COUNTING", little-endian */

enum { C_MAGIC, C_CONTEXTS, C_CALLS, C_BYTES, C_N };

static uint64_t *shared_counts; /* NULL without the variable */

static void count_shared(int which, uint64_t n)
{
    if (shared_counts != NULL)
        __atomic_fetch_add(&shared_counts[which], n, __ATOMIC_RELAXED);
}

/* Maps the file named by COUNTER_ENV, once; without it, counting is local only. */
static void map_counter(void)
{
    const char *path = getenv(COUNTER_ENV);
    int fd;
    struct stat st;
    void *p;

    if (shared_counts != NULL || path == NULL || *path == '\0')
        return;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    /* Several processes may race here; growing to the same size is harmless. */
    if (fstat(fd, &st) == 0 && st.st_size < (off_t)(C_N * sizeof(uint64_t)))
        (void)ftruncate(fd, C_N * sizeof(uint64_t));
    p = mmap(NULL, C_N * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    shared_counts = p;
    __atomic_store_n(&shared_counts[C_MAGIC], COUNTER_MAGIC, __ATOMIC_RELAXED);
}

#endif
