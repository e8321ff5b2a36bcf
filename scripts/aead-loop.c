/*
 * The per-message AEAD sequence cipherbench times, as a plain C loop over OpenSSL's
 * EVP API, to tell our harness's cost from OpenSSL's and each step's cost from the
 * others (BENCHMARKS.md, layer 1). Rates are bytes per second of the thread's CPU time,
 * as `openssl speed` and `--check-openssl` count them.
 *   gcc -O2 -o /tmp/aead-loop scripts/aead-loop.c -lcrypto
 *   /tmp/aead-loop AES-128-GCM 1024 0      # cipher, bytes, mode
 * Modes, each one message per operation (new IV, 13 bytes of AAD, update, final) but 4:
 *   0  tag through EVP_CTRL_AEAD_GET_TAG (cipherbench before issue 11)
 *   1  no tag fetched
 *   2  as 0, encrypting in place
 *   3  tag through EVP_CIPHER_CTX_get_params (cipherbench now)
 *   4  one stream of updates, no IV, AAD, final or tag (what `openssl speed -aead` does
 *      for ChaCha20-Poly1305)
 */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double cpu(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  if(argc<4){fprintf(stderr,"usage: %s CIPHER BYTES MODE\n",argv[0]);return 2;}
  const char*name=argv[1]; int len=atoi(argv[2]); int mode=atoi(argv[3]);
  EVP_CIPHER*c=EVP_CIPHER_fetch(NULL,name,NULL);
  if(!c){fprintf(stderr,"no cipher %s\n",name);return 1;}
  EVP_CIPHER_CTX*ctx=EVP_CIPHER_CTX_new();
  unsigned char key[32]={1},iv[12]={0},aad[13]={0},tag[16];
  unsigned char*in=calloc(len,1),*out=calloc(len+32,1);
  EVP_CipherInit_ex2(ctx,c,key,NULL,1,NULL);
  EVP_CipherInit_ex2(ctx,NULL,NULL,iv,-1,NULL);
  OSSL_PARAM p[2];
  p[0]=OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG,tag,16);
  p[1]=OSSL_PARAM_construct_end();
  int outl; long n=0; double t0=cpu(),t;
  unsigned char*dst=(mode==2)?in:out;
  do{ for(int i=0;i<1000;i++){ memcpy(iv,&n,8); n++;
      if(mode==4){EVP_CipherUpdate(ctx,out,&outl,in,len);continue;}
      EVP_CipherInit_ex2(ctx,NULL,NULL,iv,-1,NULL);
      EVP_CipherUpdate(ctx,NULL,&outl,aad,13);
      EVP_CipherUpdate(ctx,dst,&outl,in,len);
      EVP_CipherFinal_ex(ctx,dst+outl,&outl);
      if(mode==0||mode==2) EVP_CIPHER_CTX_ctrl(ctx,EVP_CTRL_AEAD_GET_TAG,16,tag);
      if(mode==3) EVP_CIPHER_CTX_get_params(ctx,p);}
    t=cpu()-t0;}while(t<1.0);
  printf("%-18s %6d mode=%d: %.2f GB/s per CPU second\n",name,len,mode,(double)n*len/t/1e9);
  return 0;
}
