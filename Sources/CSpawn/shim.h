#include <spawn.h>

/* glibc (2.34 and later) declares this only for _GNU_SOURCE, which Swift's view of libc is built without. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
