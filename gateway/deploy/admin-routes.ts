// Admin routes for config deploys, behind `Authorization: Bearer
// <GATEWAY_ADMIN_TOKEN>` (compared by SHA-256 digest with timingSafeEqual):
//   GET  /admin/functions           the active bundle {version, functions}
//   PUT  /admin/functions           validate whole, store, swap (400 lists every error)
//   POST /admin/functions/rollback  re-activate the previous version
// Without GATEWAY_ADMIN_TOKEN the routes answer ADMIN_DISABLED.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Hono, MiddlewareHandler } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import { gatewayError, GatewayError } from '../core/errors.ts';
import { BundleVersionConflict } from './bundle-store.ts';
import { BundleRefused, type FunctionDeployer } from './function-deployer.ts';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time token comparison (hashes first, so lengths may differ). */
export const sameToken = (a: string, b: string): boolean => timingSafeEqual(digest(a), digest(b));

/** Throws ADMIN_DISABLED / ADMIN_TOKEN_MISSING / ADMIN_TOKEN_INVALID unless the bearer token matches. */
export function checkAdminToken(expected: string | undefined, authorization: string | undefined): void {
  if (!expected) throw gatewayError('ADMIN_DISABLED');
  const m = authorization ? /^Bearer\s+(.+)$/i.exec(authorization) : null;
  if (!m) throw gatewayError('ADMIN_TOKEN_MISSING');
  if (!sameToken(m[1]!.trim(), expected)) throw gatewayError('ADMIN_TOKEN_INVALID');
}

export function mountAdminRoutes(
  app: Hono<GatewayEnv>,
  deployer: FunctionDeployer,
  adminToken: () => string | undefined = () => process.env.GATEWAY_ADMIN_TOKEN,
): void {
  const auth: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    checkAdminToken(adminToken(), c.req.header('authorization'));
    await next();
  };
  app.use('/admin/*', auth);

  app.get('/admin/functions', (c) => c.json(deployer.active ?? { version: '', functions: [] }));

  app.put('/admin/functions', async (c) => {
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch (e) {
      throw gatewayError('BODY_INVALID', { reason: `not valid JSON: ${(e as Error).message}` });
    }
    try {
      return c.json(await deployer.deploy(raw));
    } catch (e) {
      if (e instanceof BundleRefused) {
        const err = gatewayError('BUNDLE_INVALID', { count: e.errors.length });
        return c.json({ error: { ...err.toJSON().error, errors: e.errors } }, 400);
      }
      if (e instanceof BundleVersionConflict) throw gatewayError('BUNDLE_VERSION_CONFLICT', { version: e.version });
      if (e instanceof GatewayError) throw e;
      throw gatewayError('DEPLOY_UNAVAILABLE', {}, e);
    }
  });

  app.post('/admin/functions/rollback', async (c) => {
    let b;
    try {
      b = await deployer.rollback();
    } catch (e) {
      throw gatewayError('DEPLOY_UNAVAILABLE', {}, e);
    }
    if (!b) throw gatewayError('ROLLBACK_UNAVAILABLE');
    return c.json(b);
  });
}
