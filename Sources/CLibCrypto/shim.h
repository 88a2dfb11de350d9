#include <openssl/evp.h>
#include <openssl/hmac.h>
