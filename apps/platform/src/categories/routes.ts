import type { Feature } from '../context.js';
import { categories } from './catalogue.js';

export const categoriesFeature: Feature = {
  name: 'categories',
  // The taxonomy is public reference data: no credentials needed.
  apiPublic(app) {
    app.get('/api/v1/categories', async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=3600');
      return { items: categories().all };
    });
  },
};
