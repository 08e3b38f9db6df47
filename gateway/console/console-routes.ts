// The web console under /console: page shells, static assets (read at
// startup, content-hashed, cached) and the read-only JSON API the pages poll.
// With GATEWAY_CONSOLE_TOKEN set the API needs `X-Console-Token` (the admin
// token is accepted too); without it the whole console answers loopback
// clients only (console-access.ts). Admin actions never pass through here:
// the page sends them to /admin/* with the admin token, which checks it as
// for any other client.
//
// Ownership: owns the sampler (stopped by stop()) and the loaded assets.
import type { Hono, MiddlewareHandler } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import { gatewayError } from '../core/errors.ts';
import { checkConsoleLocal, checkConsoleToken } from './console-access.ts';
import { loadAssets } from './console-assets.ts';
import { mountConsoleApi, type ConsoleApiDeps } from './console-api.ts';
import { PAGES, renderPage } from './console-pages.ts';
import { ConsoleSampler, readSnapshot } from './console-sampler.ts';
import { mountDeliveryConsole, type DeliveryConsoleDeps } from '../delivery/console-delivery.ts';

export interface ConsoleDeps extends Omit<ConsoleApiDeps, 'sampler'> {
  /** Token the read-only API needs (default: GATEWAY_CONSOLE_TOKEN at request time); unset: loopback clients only. */
  consoleToken?: () => string | undefined;
  /** Also accepted for the read-only API (default: GATEWAY_ADMIN_TOKEN). */
  adminToken?: () => string | undefined;
  /** Chart sampling interval (ms, default 2000). */
  sampleMs?: number;
  /** Rollouts and usage plans for the Deploys page (gateway/delivery/). */
  delivery?: DeliveryConsoleDeps;
}

/** Mount the console on `app`; returns stop() for the sampler. */
export function mountConsole(app: Hono<GatewayEnv>, d: ConsoleDeps): { stop(): void } {
  const assets = loadAssets();
  const consoleToken = d.consoleToken ?? (() => process.env.GATEWAY_CONSOLE_TOKEN);
  const adminToken = d.adminToken ?? (() => process.env.GATEWAY_ADMIN_TOKEN);
  const sampler = new ConsoleSampler(() => readSnapshot({ modelStatistics: () => d.engine.modelStatistics(), metrics: d.metrics }), {
    intervalMs: d.sampleMs,
  });

  // No console token: nothing under /console answers anyone but this machine.
  const localUnlessToken: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    if (!consoleToken()) checkConsoleLocal(c);
    await next();
  };
  app.use('/console/*', localUnlessToken); // matches /console itself too

  for (const p of PAGES) {
    app.get(p.path, (c) => {
      c.header('Cache-Control', 'no-cache');
      // Only our own scripts run; images may be the blob: URL of an uploaded file; uPlot sizes with inline styles.
      c.header(
        'Content-Security-Policy',
        "default-src 'self'; img-src 'self' blob: data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
      );
      c.header('X-Content-Type-Options', 'nosniff');
      c.header('Referrer-Policy', 'no-referrer');
      return c.html(renderPage(assets, p.id, { localOnly: !consoleToken() }));
    });
  }
  app.get('/console/', (c) => c.redirect('/console'));

  app.get('/console/static/:name', (c) => {
    const a = assets.get(c.req.param('name'));
    if (!a) throw gatewayError('ROUTE_NOT_FOUND', { method: 'GET', path: c.req.path });
    const etag = `"${a.hash}"`;
    c.header('ETag', etag);
    c.header('Cache-Control', 'public, max-age=31536000, immutable');
    if (c.req.header('if-none-match') === etag) return c.body(null, 304);
    c.header('Content-Type', a.type);
    return c.body(a.body as Uint8Array<ArrayBuffer>);
  });

  app.use('/console/api/*', async (c, next) => {
    const token = consoleToken();
    if (token) checkConsoleToken(token, adminToken(), c.req.header('x-console-token'));
    c.header('Cache-Control', 'no-store');
    await next();
  });
  mountConsoleApi(app, { ...d, sampler });
  if (d.delivery) mountDeliveryConsole(app, d.delivery);
  return { stop: () => sampler.stop() };
}
