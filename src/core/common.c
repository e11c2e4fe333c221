/*
 * Error strings and version. The tables are generated from STG_ERRNO_MAP so
 * a code and its message cannot drift apart.
 */
#include <stagger/common.h>

const char *stg_strerror(int err)
{
    switch (err) {
#define STG__ERR_MSG(name, num, msg) \
    case num:                        \
        return msg;
        STG_ERRNO_MAP(STG__ERR_MSG)
#undef STG__ERR_MSG
    }
    return "unknown error";
}

const char *stg_errname(int err)
{
    switch (err) {
#define STG__ERR_NAME(name, num, msg) \
    case num:                         \
        return #name;
        STG_ERRNO_MAP(STG__ERR_NAME)
#undef STG__ERR_NAME
    }
    return "UNKNOWN";
}

const char *stg_version(void)
{
    return STG_VERSION_STRING;
}

unsigned stg_version_num(void)
{
    return STG_VERSION_NUM;
}
