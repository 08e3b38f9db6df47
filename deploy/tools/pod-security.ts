// Kubernetes' Pod Security Standards (kubernetes.io/docs/concepts/security/
// pod-security-standards), the rules the PodSecurity admission controller
// enforces for a namespace labelled `pod-security.kubernetes.io/enforce`:
// each control of the Baseline and Restricted profiles as a function of a
// pod spec, named as the standard names it, returning what violates it. The
// chart's pods must meet "restricted" (the dev Redis included). Controls are
// checked over every container: init, regular and ephemeral.

type Obj = Record<string, any>;

export type Level = 'baseline' | 'restricted';

export interface Control {
  name: string;
  level: Level;
  check: (pod: Obj) => string[];
}

const containersOf = (pod: Obj): Obj[] => [...(pod.initContainers ?? []), ...(pod.containers ?? []), ...(pod.ephemeralContainers ?? [])];
const each = (pod: Obj, f: (c: Obj, sc: Obj) => string | undefined): string[] =>
  containersOf(pod).flatMap((c) => {
    const r = f(c, c.securityContext ?? {});
    return r ? [`container ${c.name}: ${r}`] : [];
  });

/** The capabilities Baseline lets a container add (the container runtimes' defaults). */
const BASELINE_CAPS = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);
const RESTRICTED_VOLUMES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);
const seccompType = (sc: Obj | undefined): string | undefined => sc?.seccompProfile?.type;

export const CONTROLS: Control[] = [
  {
    name: 'HostProcess',
    level: 'baseline',
    check: (pod) => [
      ...(pod.securityContext?.windowsOptions?.hostProcess ? ['pod: windowsOptions.hostProcess is true'] : []),
      ...each(pod, (_c, sc) => (sc.windowsOptions?.hostProcess ? 'windowsOptions.hostProcess is true' : undefined)),
    ],
  },
  {
    name: 'Host Namespaces',
    level: 'baseline',
    check: (pod) => ['hostNetwork', 'hostPID', 'hostIPC'].filter((k) => pod[k]).map((k) => `pod: ${k} is true`),
  },
  {
    name: 'Privileged Containers',
    level: 'baseline',
    check: (pod) => each(pod, (_c, sc) => (sc.privileged ? 'privileged is true' : undefined)),
  },
  {
    name: 'Capabilities (baseline)',
    level: 'baseline',
    check: (pod) =>
      each(pod, (_c, sc) => {
        const bad = ((sc.capabilities?.add ?? []) as string[]).filter((x) => !BASELINE_CAPS.has(x));
        return bad.length ? `adds capabilities ${bad.join(', ')}` : undefined;
      }),
  },
  {
    name: 'HostPath Volumes',
    level: 'baseline',
    check: (pod) => ((pod.volumes ?? []) as Obj[]).filter((v) => v.hostPath).map((v) => `volume ${v.name}: hostPath`),
  },
  {
    name: 'Host Ports',
    level: 'baseline',
    check: (pod) =>
      each(pod, (c) => {
        const ports = ((c.ports ?? []) as Obj[]).filter((p) => p.hostPort).map((p) => p.hostPort);
        return ports.length ? `hostPort ${ports.join(', ')}` : undefined;
      }),
  },
  {
    name: 'AppArmor',
    level: 'baseline',
    check: (pod) => [
      ...(pod.securityContext?.appArmorProfile?.type === 'Unconfined' ? ['pod: appArmorProfile Unconfined'] : []),
      ...each(pod, (_c, sc) => (sc.appArmorProfile?.type === 'Unconfined' ? 'appArmorProfile Unconfined' : undefined)),
    ],
  },
  {
    name: 'SELinux',
    level: 'baseline',
    check: (pod) =>
      [pod.securityContext?.seLinuxOptions, ...containersOf(pod).map((c) => c.securityContext?.seLinuxOptions)]
        .filter((o: Obj | undefined) => o && (!SELINUX_TYPES.has(o.type ?? '') || o.user || o.role))
        .map((o: Obj) => `seLinuxOptions ${JSON.stringify(o)} not allowed`),
  },
  {
    name: '/proc Mount Type',
    level: 'baseline',
    check: (pod) => each(pod, (_c, sc) => (sc.procMount && sc.procMount !== 'Default' ? `procMount ${sc.procMount}` : undefined)),
  },
  {
    name: 'Seccomp (baseline)',
    level: 'baseline',
    check: (pod) => [
      ...(seccompType(pod.securityContext) === 'Unconfined' ? ['pod: seccompProfile Unconfined'] : []),
      ...each(pod, (_c, sc) => (seccompType(sc) === 'Unconfined' ? 'seccompProfile Unconfined' : undefined)),
    ],
  },
  {
    name: 'Sysctls',
    level: 'baseline',
    check: (pod) =>
      ((pod.securityContext?.sysctls ?? []) as Obj[])
        .filter((s) => !SAFE_SYSCTLS.has(s.name))
        .map((s) => `pod: sysctl ${s.name} is not in the safe set`),
  },
  {
    name: 'Volume Types',
    level: 'restricted',
    check: (pod) =>
      ((pod.volumes ?? []) as Obj[]).flatMap((v) => {
        const type = Object.keys(v).find((k) => k !== 'name');
        return type && RESTRICTED_VOLUMES.has(type) ? [] : [`volume ${v.name}: type ${type} is not allowed`];
      }),
  },
  {
    name: 'Privilege Escalation',
    level: 'restricted',
    check: (pod) => each(pod, (_c, sc) => (sc.allowPrivilegeEscalation === false ? undefined : 'allowPrivilegeEscalation is not false')),
  },
  {
    name: 'Running as Non-root',
    level: 'restricted',
    check: (pod) =>
      each(pod, (_c, sc) => {
        if (sc.runAsNonRoot === false) return 'runAsNonRoot is false';
        return sc.runAsNonRoot === true || pod.securityContext?.runAsNonRoot === true
          ? undefined
          : 'runAsNonRoot is not true (neither the pod nor the container sets it)';
      }),
  },
  {
    name: 'Running as Non-root user',
    level: 'restricted',
    check: (pod) => [
      ...(pod.securityContext?.runAsUser === 0 ? ['pod: runAsUser is 0'] : []),
      ...each(pod, (_c, sc) => (sc.runAsUser === 0 ? 'runAsUser is 0' : undefined)),
    ],
  },
  {
    name: 'Seccomp (restricted)',
    level: 'restricted',
    check: (pod) =>
      each(pod, (_c, sc) => {
        const t = seccompType(sc) ?? seccompType(pod.securityContext);
        return t === 'RuntimeDefault' || t === 'Localhost'
          ? undefined
          : `seccompProfile.type is ${t ?? 'unset'} (RuntimeDefault or Localhost, on the pod or the container)`;
      }),
  },
  {
    name: 'Capabilities (restricted)',
    level: 'restricted',
    check: (pod) =>
      each(pod, (_c, sc) => {
        const drop = (sc.capabilities?.drop ?? []) as string[];
        const add = ((sc.capabilities?.add ?? []) as string[]).filter((x) => x !== 'NET_BIND_SERVICE');
        if (!drop.includes('ALL')) return 'capabilities.drop does not include ALL';
        return add.length ? `adds capabilities ${add.join(', ')} (only NET_BIND_SERVICE is allowed)` : undefined;
      }),
  },
];

/** Violations of `pod` (a PodSpec) against `level` (restricted includes baseline), each "control: what". */
export function podSecurityViolations(pod: Obj, level: Level): string[] {
  return CONTROLS.filter((c) => level === 'restricted' || c.level === 'baseline').flatMap((c) =>
    c.check(pod).map((v) => `${c.name}: ${v}`),
  );
}
