/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: A network boot's network: the cards, DHCP, what the menu is told.
 */
#include "init.h"
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

/* A network boot (an image built with its network, nmbl-init(8)): the
 * DHCP client, its configuration and where it keeps its leases; the list
 * of cards the menu reads (NMBL_NET_CARDS). */
#define DHCPCD "/usr/sbin/dhcpcd"
#define DHCPCD_CONF "/etc/nmbl/dhcpcd.conf"
#define DHCPCD_LEASES "/var/lib/dhcpcd"
#define DHCPCD_RUN "/run/dhcpcd"
#define NET_DIR RUN_DIR "/net"
#define NET_CARDS NET_DIR "/cards"
/* How long DHCP may take to answer: a switch port's spanning tree
 * (15 s of listening, 15 of learning before it forwards) and then some. */
#define DHCP_SECONDS 45
/* How long a card may take to see its link once up (autonegotiation takes
 * a few seconds on copper). */
#define LINK_SECONDS 10
/* A DHCP answer is at most a few hundred bytes (RFC 2131's options field
 * is 312 by default). */
#define LEASE_MAX 4096
/* What PXE firmware says it is (RFC 4578's architecture numbers), so that
 * a DHCP server answers nmbl as it answered the firmware. */
#if defined(__x86_64__)
#define PXE_ARCH "00007"
#elif defined(__aarch64__)
#define PXE_ARCH "00011"
#elif defined(__i386__)
#define PXE_ARCH "00006"
#else
#define PXE_ARCH "00000"
#endif
#define PXE_VENDOR_CLASS "PXEClient:Arch:" PXE_ARCH ":UNDI:003016"

/* The card BOOT names, once its driver has made it (uevents on FD),
 * malloc'ed; NULL after ESP_WAIT_SECONDS. */
static char *wait_for_card(struct nmbl_ctx *ctx, int fd, const struct nmbl_network_boot *boot)
{
	long long deadline = now_ms() + ESP_WAIT_SECONDS * 1000LL;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char *ifname = NULL;

	while (nmbl_find_network_interface(ctx, boot->mac, &ifname) < 0) {
		long long left = deadline - now_ms();

		if (left <= 0 || fd < 0)
			return NULL;
		if (poll(&p, 1, (int)left) > 0)
			drain_uevents(ctx, fd);
	}
	return ifname;
}

/* IFNAME up (its driver starts it; the link comes by itself). */
static int card_up(const char *ifname)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r = 0;

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)) {
		r = -errno;
		say("cannot bring %s up: %s", ifname, strerror(-r));
	}
	close(fd);
	return r;
}

static bool has_link(const char *ifname)
{
	char path[128], carrier[4] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/carrier", ifname);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(carrier, sizeof(carrier), f))
		carrier[0] = '\0';
	fclose(f);
	return carrier[0] == '1';
}

/* What is left to try when a card failed: the machine's other cards, or
 * nothing. */
static const char *then_what(bool others)
{
	return others ? ": trying the other cards" : ": the menu starts without network";
}

/* IFNAME up, and its link: -ENOLINK after LINK_SECONDS without one (no
 * cable, a switch port that is down), with a sentence. */
static int link_up(const char *ifname, bool others)
{
	long long deadline = now_ms() + LINK_SECONDS * 1000LL;
	int r = card_up(ifname);

	if (r < 0)
		return r;
	while (!has_link(ifname)) {
		if (now_ms() > deadline) {
			say("no link on %s within %d s (no cable, or the switch's port is down)%s",
			    ifname, LINK_SECONDS, then_what(others));
			return -ENOLINK;
		}
		usleep(50 * 1000);
	}
	return 0;
}

/* Where dhcpcd keeps its lease and its run-time files (its pid file, its
 * control socket): its user's (nmbl_contain_dhcp()). */
static int dhcp_dirs(void)
{
	static const char *const dirs[] = { DHCPCD_LEASES, DHCPCD_RUN };

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		if (mkdir(dirs[i], 0750) < 0 && errno != EEXIST)
			return -errno;
		if (chown(dirs[i], NMBL_NET_UID, NMBL_NET_GID) < 0 || chmod(dirs[i], 0750) < 0)
			return -errno;
	}
	return 0;
}

/* DHCP on IFNAME (dhcpcd, over IPv4), at most SECONDS: 0 when it
 * answered (dhcpcd keeps the answer); otherwise what dhcpcd said, and a
 * sentence.  dhcpcd, which parses what the network sends, runs contained
 * (nmbl_contain_dhcp()); in the foreground its own --timeout does not
 * apply, so it is ended after SECONDS. */
static int ask_dhcp(const char *ifname, unsigned seconds, bool others)
{
	char *argv[] = { DHCPCD, "--config", DHCPCD_CONF, "--oneshot", "--nobackground",
			 "--quiet", "--nolink", "--vendorclassid=" PXE_VENDOR_CLASS, "-4",
			 "--waitip=4", (char *)ifname, NULL };
	int r;

	r = dhcp_dirs();
	if (r < 0) {
		say("cannot make dhcpcd's directories: %s", strerror(-r));
		return r;
	}
	/* What dhcpcd says is said when it failed (its complaints of what
	 * the image lacks on purpose otherwise). */
	r = run_helper("dhcpcd", argv, nmbl_contain_dhcp, true, -1, seconds, true);
	if (r == -ETIMEDOUT)
		say("no DHCP answer on %s within %u s%s", ifname, seconds, then_what(others));
	else if (r != 0)
		say("no DHCP answer on %s (dhcpcd %s %d)%s", ifname, r < 0 ? "error" : "status", r,
		    then_what(others));
	return r;
}

/* The other cards (CARDS[FIRST..N-1]) up, then DHCP on those with a link,
 * in turn, until one answers: its index, or N. */
static size_t try_other_cards(const struct nmbl_network_card *cards, size_t first, size_t n,
			      unsigned seconds)
{
	long long deadline = now_ms() + LINK_SECONDS * 1000LL;
	bool all;

	for (size_t i = first; i < n; i++)
		(void)card_up(cards[i].ifname);
	do {
		all = true;
		for (size_t i = first; i < n; i++)
			all = all && has_link(cards[i].ifname);
		if (!all)
			usleep(50 * 1000);
	} while (!all && now_ms() < deadline);
	for (size_t i = first; i < n; i++) {
		if (!has_link(cards[i].ifname)) {
			say("no link on %s either", cards[i].ifname);
			continue;
		}
		if (ask_dhcp(cards[i].ifname, seconds, i + 1 < n) == 0)
			return i;
	}
	return n;
}

/* The menu's list of cards, CARDS[0..N-1] (the one the firmware booted
 * from first, when BOOT_FIRST: efinet0, with its VLAN and URL), and
 * what DHCP gave CARDS[ANSWERED] (none when ANSWERED is N), in a file the
 * menu reads.  0, or -errno. */
static int write_cards(const struct nmbl_network_card *cards, size_t n, size_t answered,
		       const struct nmbl_network_boot *boot, bool boot_first)
{
	char lease[128], ack[128] = "-";
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	FILE *out;
	int r = 0;

	(void)mkdir(RUN_DIR, 0755);
	if (mkdir(NET_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (answered < n) {
		snprintf(lease, sizeof(lease), DHCPCD_LEASES "/%s.lease", cards[answered].ifname);
		snprintf(ack, sizeof(ack), NET_DIR "/%s.dhcp", cards[answered].ifname);
		/* dhcpcd is assumed taken over by what the network sent. */
		r = nmbl_read_helper_file(lease, NMBL_NET_UID, LEASE_MAX, &data, &len);
		if (r < 0)
			return r;
		out = len ? fopen(ack, "we") : NULL;
		if (!out || fwrite(data, 1, len, out) != len)
			r = -EIO;
		if (out && fclose(out) != 0)
			r = -EIO;
		if (r < 0)
			return r;
	}
	out = fopen(NET_CARDS, "we");
	if (!out)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *m = cards[i].mac;

		fprintf(out, "%02x:%02x:%02x:%02x:%02x:%02x %s ", m[0], m[1], m[2], m[3], m[4],
			m[5], i == answered ? ack : "-");
		if (i == 0 && boot_first && boot->vlan >= 0)
			fprintf(out, "%d ", boot->vlan);
		else
			fputs("- ", out);
		fprintf(out, "%s\n", i == 0 && boot_first && boot->uri ? boot->uri : "-");
	}
	if (fclose(out) != 0)
		return -EIO;
	return r;
}

/*
 * nmbl was started from the network: the card it came from up, DHCP
 * asked (dhcpcd, which keeps the answer); when that card has no link or
 * no answer, the machine's other cards, in turn; and the menu told of
 * them all.  The menu comes in any case; without a network it finds no
 * grub.cfg there and says so.
 */
bool start_network(struct nmbl_ctx *ctx, int fd, const struct nmbl_network_boot *boot)
{
	_cleanup_free_ struct nmbl_network_card *cards = NULL;
	_cleanup_free_ char *boot_if = NULL;
	size_t n = 0, answered;
	bool boot_first = false, explicit;
	unsigned seconds = seconds_param(ctx, "nmbl.dhcp-timeout", DHCP_SECONDS, &explicit);
	int r;

	if (access(DHCPCD, X_OK) < 0) {
		say("started from the network, but this image has no network (an image for "
		    "network boots has)");
		return false;
	}
	if (!seconds)
		seconds = 1;
	/* What the firmware did that nmbl does not do yet: said, and DHCP
	 * asked over IPv4, untagged, all the same. */
	if (boot->ip_version == 6)
		say("the firmware booted over IPv6, which nmbl's network does not do yet: "
		    "asking DHCP over IPv4");
	if (boot->vlan >= 0)
		say("the firmware booted on VLAN %d, which nmbl does not set up yet: asking DHCP "
		    "untagged", boot->vlan);
	boot_if = wait_for_card(ctx, fd, boot);
	if (!boot_if)
		say("started from the network card %02x:%02x:%02x:%02x:%02x:%02x, which Linux "
		    "does not show (no driver for it in this image?)", boot->mac[0], boot->mac[1],
		    boot->mac[2], boot->mac[3], boot->mac[4], boot->mac[5]);
	r = nmbl_list_network_cards(ctx, &cards, &n);
	if (r < 0)
		say("cannot list the network cards: %s", strerror(-r));
	/* The card the firmware booted from first: GRUB's efinet0. */
	for (size_t i = 0; boot_if && i < n && !boot_first; i++) {
		if (strcmp(cards[i].ifname, boot_if) == 0) {
			struct nmbl_network_card card = cards[i];

			memmove(&cards[1], &cards[0], i * sizeof(*cards));
			cards[0] = card;
			boot_first = true;
		}
	}
	answered = n;
	if (boot_first && link_up(boot_if, n > 1) == 0 &&
	    ask_dhcp(boot_if, seconds, n > 1) == 0)
		answered = 0;
	if (answered == n && n > (size_t)boot_first)
		answered = try_other_cards(cards, boot_first, n, seconds);
	if (answered == n) {
		if (n > 1)
			say("no card got a DHCP answer: the menu starts without network");
		return false;
	}
	r = write_cards(cards, n, answered, boot, boot_first);
	if (r < 0) {
		say("cannot give the menu what DHCP answered: %s", strerror(-r));
		return false;
	}
	setenv(NET_CARDS_ENV, NET_CARDS, 1);
	say("network: %s is up (DHCP), at %.3f s", cards[answered].ifname, since_boot());
	return true;
}

/* IFNAME without an IPv4 address and down, which takes its routes with
 * it (and IPv6's addresses): 0, or -errno. */
static int card_down(int fd, const char *ifname)
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	/* Setting 0.0.0.0 removes the address the name holds; a secondary
	 * one may take its place. */
	for (int i = 0; i < 16 && ioctl(fd, SIOCGIFADDR, &ifr) == 0; i++) {
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = 0;
		if (ioctl(fd, SIOCSIFADDR, &ifr) < 0)
			return -errno;
	}
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	if (!(ifr.ifr_flags & IFF_UP))
		return 0;
	ifr.ifr_flags &= ~IFF_UP;
	return ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

/*
 * Before a direct boot, the network as the firmware would leave it: every
 * card nmbl brought up down, with no address or route of what DHCP said
 * (a rogue server's among them): the system configures its own.
 */
void stop_network(void)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct if_nameindex *names = if_nameindex();

	if (fd < 0 || !names) {
		say("cannot take the network down before the hand-over: %m");
		if (names)
			if_freenameindex(names);
		return;
	}
	for (struct if_nameindex *i = names; i->if_index; i++) {
		int r = strcmp(i->if_name, "lo") == 0 ? 0 : card_down(fd, i->if_name);

		if (r < 0)
			say("cannot take %s down: %s", i->if_name, strerror(-r));
	}
	if_freenameindex(names);
}
