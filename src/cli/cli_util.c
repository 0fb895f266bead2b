/* What the commands share (cli.h): the one error line on stderr. */
#include "cli/cli.h"

#include <stdio.h>

void mp_cli_error(const char *who, const char *prefix, const char *msg) {
    fputs(who ? who : "modelprof", stderr);
    fputs(": ", stderr);
    if (prefix) fputs(prefix, stderr);
    for (const unsigned char *p = (const unsigned char *)(msg ? msg : ""); *p; p++) {
        if (*p == '\n')
            fputs("\\n", stderr);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
}
