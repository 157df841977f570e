/* The kernel's network-device types, only the fields segchain's tracing
 * programs read (a device's ifindex and its namespace's inode), relocated
 * by CO-RE against the running kernel's BTF. */
#ifndef SEGCHAIN_CORE_NETDEV_H
#define SEGCHAIN_CORE_NETDEV_H

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

#endif
