// Which addresses a caller's URL may reach (src/kernel/outbound/address.ts), judged without
// connecting anywhere: the ranges the policy refuses in every spelling, the allowance for
// on-premise setups, and URLs refused before any connection (scheme, literal, localhost).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseAllowance, refusedRange } from '../../src/kernel/outbound/address.ts';
import { checkUrl, UnreadableUrl, type OutboundRules } from '../../src/kernel/outbound/policy.ts';

const REFUSED: [string, string][] = [
  ['127.0.0.1', 'loopback'],
  ['127.255.0.9', 'loopback'],
  ['::1', 'loopback'],
  ['10.1.2.3', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['169.254.169.254', 'linkLocal'],
  ['fe80::1', 'linkLocal'],
  ['100.64.0.1', 'carrierGradeNat'],
  ['224.0.0.1', 'multicast'],
  ['ff02::1', 'multicast'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['::', 'unspecified'],
  ['255.255.255.255', 'broadcast'],
  ['fc00::1', 'uniqueLocal'],
  ['fd12:3456::1', 'uniqueLocal'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:169.254.169.254', 'linkLocal'],
  ['::127.0.0.1', 'loopback'],
  ['64:ff9b::7f00:1', 'loopback'],
  ['64:ff9b::a9fe:a9fe', 'linkLocal'],
  ['64:ff9b:1::1', 'rfc6052'],
  ['2002:7f00:1::', '6to4'],
  ['2001::1', 'teredo'],
  ['192.0.2.1', 'reserved'],
  ['[::1]', 'loopback'],
];

test('every internal range is refused, in every spelling', () => {
  for (const [ip, range] of REFUSED) assert.equal(refusedRange(ip), range, ip);
});

test('public addresses pass, also through the IPv4-mapped and NAT64 forms', () => {
  for (const ip of ['8.8.8.8', '93.184.215.14', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '172.32.0.1', '100.128.0.1']) assert.equal(refusedRange(ip), null, ip);
});

test('AI_FETCH_ALLOW_PRIVATE: true lets all through; a CIDR list only its ranges', () => {
  assert.equal(refusedRange('10.0.0.5', parseAllowance('true')), null);
  const some = parseAllowance('10.20.0.0/16, fd00:1::/48, 192.168.1.5, not-an-address');
  assert.equal(refusedRange('10.20.3.4', some), null);
  assert.equal(refusedRange('::ffff:10.20.3.4', some), null);
  assert.equal(refusedRange('fd00:1::9', some), null);
  assert.equal(refusedRange('192.168.1.5', some), null);
  assert.equal(refusedRange('192.168.1.6', some), 'private');
  assert.equal(refusedRange('10.21.0.1', some), 'private');
  assert.equal(refusedRange('127.0.0.1', some), 'loopback');
  for (const off of ['', 'false', '0', 'off']) assert.equal(refusedRange('10.0.0.1', parseAllowance(off)), 'private');
});

test('refused before any connection: other schemes, literal internal addresses in any spelling the URL parser accepts, localhost names', () => {
  const rules: OutboundRules = { allow: parseAllowance(''), dnsServers: [], key: '' };
  for (const u of ['file:///etc/passwd', 'ftp://example.com/x', 'gopher://x/', 'http://127.0.0.1/', 'http://2130706433/', 'http://0x7f.1/', 'http://017700000001/', 'http://[::ffff:127.0.0.1]/', 'http://169.254.169.254/latest/meta-data/', 'http://localhost/', 'http://LOCALHOST./', 'http://x.localhost/', 'http://[fe80::1]/']) {
    assert.throws(() => checkUrl(new URL(u), rules), UnreadableUrl, u);
  }
  for (const u of ['https://example.com/cat.png', 'http://93.184.215.14/x', 'http://[2606:4700::1111]/']) checkUrl(new URL(u), rules);
});
